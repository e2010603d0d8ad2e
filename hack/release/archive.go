package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/operator-framework/oria/hack/reproducible"
)

const (
	// pluginBin is the plugin's binary, in each archive and as krew's bin.
	pluginBin = "kubectl-oria"
	// licenseFile is the license, in each archive (krew wants it there).
	licenseFile = "LICENSE"
)

// archiveName is the plugin archive of a platform, as kubectl-operator's
// releases name theirs: kubectl-oria_v0.1.0_linux_amd64.tar.gz.
func archiveName(version string, p reproducible.Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", pluginBin, version, p.OS, p.Arch)
}

// archive is a deterministic tar.gz of the plugin's binary (0755) and the
// license (0644), both at the archive's top, every time mtime.
func archive(binary, license []byte, mtime time.Time) ([]byte, error) {
	t, err := reproducible.Tar([]reproducible.File{
		{Name: pluginBin, Mode: 0o755, Data: binary},
		{Name: licenseFile, Mode: 0o644, Data: license},
	}, mtime)
	if err != nil {
		return nil, err
	}
	return reproducible.Gzip(t)
}

// sha256Hex is the hex SHA-256 of b, as krew's sha256 field and sha256sum
// print it.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// checksumLine is the content of <archive>.sha256, in sha256sum's format
// (`sha256sum -c kubectl-oria_....tar.gz.sha256` checks it).
func checksumLine(name string, b []byte) string {
	return sha256Hex(b) + "  " + name + "\n"
}
