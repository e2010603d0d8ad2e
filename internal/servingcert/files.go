package servingcert

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The files the webhook server reads (controller-runtime's default names),
// and the Secret's keys of the same names (cert-controller's).
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
)

// dataLink is the symlink to the directory holding the current files, as
// in a kubelet's Secret volume.
const dataLink = "..data"

// writeFiles writes files into dir as the kubelet writes a Secret volume,
// so that no reader ever sees one file new and the other old (a
// certificate with another's key): the files go into a new directory
// "..<random>", a symlink to it replaces dir/..data by a rename (atomic),
// each name is a symlink to ..data/<name>, and the previous directory is
// removed (which tells the webhook server's certificate watcher to read
// them again).
func writeFiles(dir string, files map[string][]byte) error {
	fresh, err := os.MkdirTemp(dir, "..")
	if err != nil {
		return fmt.Errorf("writing the serving certificate into %s: %w", dir, err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(fresh, name), b, 0o600); err != nil {
			_ = os.RemoveAll(fresh)
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	previous, _ := os.Readlink(filepath.Join(dir, dataLink))
	tmp := filepath.Join(dir, dataLink+"_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(fresh), tmp); err != nil {
		return fmt.Errorf("linking the serving certificate: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return fmt.Errorf("switching to the new serving certificate: %w", err)
	}
	for name := range files {
		p, want := filepath.Join(dir, name), filepath.Join(dataLink, name)
		if target, err := os.Readlink(p); err == nil && target == want {
			continue
		}
		_ = os.Remove(p)
		if err := os.Symlink(want, p); err != nil {
			return fmt.Errorf("linking %s: %w", name, err)
		}
	}
	if previous != "" && previous != filepath.Base(fresh) && strings.HasPrefix(previous, "..") {
		if err := os.RemoveAll(filepath.Join(dir, previous)); err != nil {
			return fmt.Errorf("removing the previous serving certificate: %w", err)
		}
	}
	return nil
}

// clearFiles makes dir (creating it) hold no certificate: what an earlier
// run wrote (a container restarted in its pod keeps its emptyDir) may be
// from a Secret since replaced, and must not be served. It fails when dir
// is not writable (a Secret volume: internal certificate management writes
// the certificate itself).
func clearFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the certificate directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading the certificate directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if n := e.Name(); n == CertName || n == KeyName || strings.HasPrefix(n, "..") {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("removing an earlier serving certificate from %s (--cert-management=internal writes it there: mount a writable emptyDir, not the Secret): %w", dir, err)
			}
		}
	}
	probe, err := os.MkdirTemp(dir, "..")
	if err != nil {
		return fmt.Errorf("the certificate directory %s is not writable (--cert-management=internal writes the certificate there: mount a writable emptyDir, not the Secret): %w", dir, err)
	}
	return os.Remove(probe)
}
