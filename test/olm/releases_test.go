package olm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/operator-framework/oria/test/localcluster"
)

// The suite runs once per OLM v1 release: every release that has a wrapper
// module hack/tools/olm-<version> (hack/olm.sh builds it), oldest first, or
// those $ORIA_OLM_VERSIONS lists (comma- or space-separated), e.g.
// ORIA_OLM_VERSIONS=v1.5.1. Each run has a control plane of its own.

// olmRelease is a release of operator-controller and catalogd, built.
type olmRelease struct {
	version string
	// dir holds the binaries and the release's CRDs (hack/olm.sh).
	dir string
	olmFeatures
}

// olmFeatures is what differs between releases, as far as the suite is
// concerned.
type olmFeatures struct {
	// featureGates is operator-controller's --feature-gates.
	featureGates string
	// watchNamespace: it installs registry+v1 bundles in SingleNamespace
	// and OwnNamespace mode, given spec.config.inline.watchNamespace.
	watchNamespace bool
	// ceController is the name of operator-controller's ClusterExtension
	// controller: the "controller" label of its controller-runtime metrics.
	ceController string
	// inPod: the binaries start only with a pod's ServiceAccount token
	// file (pod_test.go).
	inPod bool
}

// features is what each release does; a release not listed here is run
// like v1.2.0.
var features = map[string]olmFeatures{
	"v1.2.0": {ceController: "clusterextension"},
	// The alpha SingleOwnNamespaceInstallSupport gate (off by default)
	// reads spec.config.inline.watchNamespace, a field of the
	// "experimental" CRD hack/olm.sh installs. With no watchNamespace the
	// gate changes nothing: the other tests run as with the default.
	"v1.5.1": {
		featureGates:   "SingleOwnNamespaceInstallSupport=true",
		watchNamespace: true,
		ceController:   "controller-operator-cluster-extension-controller",
		inPod:          true,
	},
}

// underTest is the release of the current run.
var underTest olmRelease

// olmReleases returns the releases to run against, each built (once,
// cached) by hack/olm.sh.
func olmReleases() ([]olmRelease, error) {
	versions, err := olmVersions()
	if err != nil {
		return nil, err
	}
	var out []olmRelease
	for _, v := range versions {
		dir, err := buildOLM(v)
		if err != nil {
			return nil, err
		}
		f, ok := features[v]
		if !ok {
			f = features["v1.2.0"]
		}
		out = append(out, olmRelease{version: v, dir: dir, olmFeatures: f})
	}
	return out, nil
}

// olmVersions returns $ORIA_OLM_VERSIONS, or the version of every wrapper
// module hack/tools/olm-<version>, oldest first.
func olmVersions() ([]string, error) {
	if env := os.Getenv("ORIA_OLM_VERSIONS"); env != "" {
		return strings.FieldsFunc(env, func(r rune) bool { return r == ',' || r == ' ' }), nil
	}
	dirs, err := filepath.Glob(filepath.Join(localcluster.RepoRoot(), "hack", "tools", "olm-v*"))
	if err != nil {
		return nil, err
	}
	var versions []string
	for _, d := range dirs {
		versions = append(versions, strings.TrimPrefix(filepath.Base(d), "olm-"))
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("no wrapper module hack/tools/olm-v*")
	}
	parsed := map[string]*version.Version{}
	for _, v := range versions {
		if parsed[v], err = version.ParseSemantic(v); err != nil {
			return nil, fmt.Errorf("wrapper module hack/tools/olm-%s: %w", v, err)
		}
	}
	slices.SortFunc(versions, func(a, b string) int {
		switch {
		case parsed[a].LessThan(parsed[b]):
			return -1
		case parsed[b].LessThan(parsed[a]):
			return 1
		}
		return 0
	})
	return versions, nil
}

// buildOLM builds (once, cached) operator-controller and catalogd at v with
// hack/olm.sh and returns their directory.
func buildOLM(v string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(localcluster.RepoRoot(), "hack", "olm.sh"), v)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/olm.sh %s: %w", v, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// needWatchNamespace skips t unless the release under test installs with
// spec.config.inline.watchNamespace.
func needWatchNamespace(t *testing.T) {
	t.Helper()
	if !underTest.watchNamespace {
		t.Skipf("operator-controller %s has no spec.config.inline.watchNamespace (the field and the "+
			"SingleOwnNamespaceInstallSupport gate's use of it arrived after v1.2.0; this suite runs it from v1.5.1)", underTest.version)
	}
}
