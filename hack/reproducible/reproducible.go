// Package reproducible holds what `make image` (hack/image) and `make
// release` (hack/release) share so that two builds of one commit give the
// same bytes: the source date (SOURCE_DATE_EPOCH, else the commit time), the
// revision, deterministic tar and gzip streams, and the static, -trimpath Go
// build of a command for a platform.
package reproducible

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// File is one regular file of an archive or image layer.
type File struct {
	// Name is the slash-separated path inside the archive, without a
	// leading slash ("oria", "LICENSE").
	Name string
	// Mode is the permission bits (0o755 for a binary, 0o644 otherwise).
	Mode fs.FileMode
	Data []byte
}

// Tar writes files as a tar stream that depends only on their names, modes
// and contents and on mtime: entries sorted by name, owned by 0:0 with no
// user or group names, every time mtime (truncated to the second), USTAR
// format (no PAX records, so no access or change times).
func Tar(files []File, mtime time.Time) ([]byte, error) {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, f := range sorted {
		if f.Name == "" || path.IsAbs(f.Name) || path.Clean(f.Name) != f.Name || strings.HasPrefix(f.Name, "../") {
			return nil, fmt.Errorf("tar entry %q: want a clean relative path", f.Name)
		}
		if i > 0 && sorted[i-1].Name == f.Name {
			return nil, fmt.Errorf("tar entry %q: twice", f.Name)
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Name,
			Mode:     int64(f.Mode.Perm()),
			Size:     int64(len(f.Data)),
			ModTime:  mtime.UTC().Truncate(time.Second),
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar entry %q: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("tar entry %q: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Gzip compresses b with a header that carries no name, no time and no
// operating system ("unknown"), at the best compression: the output depends
// only on b (and on the Go release's compress/flate).
func Gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.OS = 255 // unknown, whatever the build machine
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SourceDate is the time every timestamp of an artifact takes:
// SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/)
// when set, else the commit time of HEAD in dir.
func SourceDate(dir string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		out, err := git(dir, "log", "-1", "--format=%ct")
		if err != nil {
			return time.Time{}, fmt.Errorf("no SOURCE_DATE_EPOCH and no commit time: %w", err)
		}
		s = out
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("source date %q: want seconds since 1970", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// Revision is the commit HEAD names in dir (a full hash).
func Revision(dir string) (string, error) {
	return git(dir, "rev-parse", "HEAD")
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
