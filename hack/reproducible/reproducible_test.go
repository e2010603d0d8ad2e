package reproducible

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var date = time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)

type entry struct {
	Name     string
	Mode     int64
	Uid, Gid int
	Owner    string
	ModTime  time.Time
	Format   tar.Format
	Data     string
}

func entries(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out = append(out, entry{h.Name, h.Mode, h.Uid, h.Gid, h.Uname + h.Gname, h.ModTime.UTC(), h.Format, string(data)})
	}
}

func TestTar(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []File
		want  []entry
		err   string
	}{{
		name:  "sorted by name, root-owned, the date to the second",
		files: []File{{Name: "oria", Mode: 0o755, Data: []byte("bin")}, {Name: "LICENSE", Mode: 0o644, Data: []byte("text")}},
		want: []entry{
			{Name: "LICENSE", Mode: 0o644, ModTime: date.Truncate(time.Second), Format: tar.FormatUSTAR, Data: "text"},
			{Name: "oria", Mode: 0o755, ModTime: date.Truncate(time.Second), Format: tar.FormatUSTAR, Data: "bin"},
		},
	}, {
		name:  "only the permission bits",
		files: []File{{Name: "a/b", Mode: 0o4777 | 1<<31, Data: nil}},
		want:  []entry{{Name: "a/b", Mode: 0o777, ModTime: date.Truncate(time.Second), Format: tar.FormatUSTAR}},
	}, {
		name:  "an absolute path",
		files: []File{{Name: "/oria"}},
		err:   "clean relative path",
	}, {
		name:  "a path out of the archive",
		files: []File{{Name: "../oria"}},
		err:   "clean relative path",
	}, {
		name:  "a name twice",
		files: []File{{Name: "a"}, {Name: "a"}},
		err:   "twice",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Tar(tc.files, date)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, entries(t, b)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			reversed := slices.Clone(tc.files)
			slices.Reverse(reversed)
			again, err := Tar(reversed, date.Add(time.Millisecond))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(b, again), "the order given and sub-second times change nothing")
		})
	}
}

func TestGzip(t *testing.T) {
	in := []byte(strings.Repeat("oria ", 1000))
	a, err := Gzip(in)
	require.NoError(t, err)
	b, err := Gzip(in)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a, b))
	zr, err := gzip.NewReader(bytes.NewReader(a))
	require.NoError(t, err)
	assert.Empty(t, zr.Name)
	assert.True(t, zr.ModTime.IsZero(), "no time in the header: %s", zr.ModTime)
	assert.Equal(t, byte(255), zr.OS)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, in, out)
}

func TestSourceDate(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	d, err := SourceDate(t.TempDir()) // not a checkout: the variable alone decides
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1700000000, 0).UTC(), d)
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	_, err = SourceDate(".")
	assert.Error(t, err)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	d, err = SourceDate(".") // the commit time of this checkout
	require.NoError(t, err)
	assert.True(t, d.Before(time.Now()) && d.After(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)), "commit time %s", d)
}

func TestParsePlatforms(t *testing.T) {
	got, err := ParsePlatforms("linux/amd64, darwin/arm64")
	require.NoError(t, err)
	assert.Equal(t, []Platform{{"linux", "amd64"}, {"darwin", "arm64"}}, got)
	for _, bad := range []string{"", "linux", "linux/", "/amd64", "linux/arm/v7"} {
		_, err := ParsePlatforms(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestBuildEnv: the caller's GOFLAGS, cgo and targets never reach the
// build; the rest of the environment does.
func TestBuildEnv(t *testing.T) {
	t.Setenv("GOFLAGS", "-race")
	t.Setenv("CGO_ENABLED", "1")
	t.Setenv("GOAMD64", "v3")
	t.Setenv("ORIA_TEST_KEEP", "yes")
	env := Build{}.Env(Platform{OS: "linux", Arch: "arm64"})
	got := map[string][]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = append(got[k], v)
	}
	for k, v := range map[string]string{"GOFLAGS": "", "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": "arm64", "GOAMD64": "v1", "GOARM64": "v8.0", "ORIA_TEST_KEEP": "yes"} {
		assert.Equal(t, []string{v}, got[k], k)
	}
	args := Build{Package: "./cmd/oria", LDFlags: "-s -w -X main.version=v1"}.Args("out/oria")
	assert.Equal(t, []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -X main.version=v1", "-o", "out/oria", "./cmd/oria"}, args)
}
