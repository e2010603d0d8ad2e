package lookup

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// ScopesRecheck is how soon a controller looks again when discovery does
// not know one of the APIs it asked about yet (a CRD that was just
// created).
const ScopesRecheck = 2 * time.Second

// APIScopes answers whether the APIs of CRDs are namespaced or
// cluster-scoped. oria watches CRDs as metadata only (their schemas are
// large), and metadata does not carry spec.scope; the API server's
// discovery does, for every API at once: one refresh is two requests with
// aggregated discovery, whatever the number of CRDs. A CRD's scope never
// changes, so an answer is kept for the life of the process; a CRD that
// discovery does not know yet (just created) triggers a refresh, at most
// once per MinRefreshInterval.
type APIScopes struct {
	// Discovery lists the server's APIs.
	Discovery discovery.DiscoveryInterface
	// MinRefreshInterval bounds how often unknown CRDs cause a refresh.
	MinRefreshInterval time.Duration
	// Now returns the current time (tests set it).
	Now func() time.Time

	mu          sync.Mutex
	namespaced  map[string]bool
	lastRefresh time.Time
}

// NewAPIScopes returns an APIScopes reading d.
func NewAPIScopes(d discovery.DiscoveryInterface) *APIScopes {
	return &APIScopes{Discovery: d, MinRefreshInterval: time.Second, Now: time.Now, namespaced: map[string]bool{}}
}

// ClusterScoped returns, in the order given, the CRDs among crds (names
// "<plural>.<group>") whose API is cluster-scoped, and those whose scope is
// not known yet (not in discovery).
func (a *APIScopes) ClusterScoped(crds []string) (cluster, unknown []string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	missing := func() []string {
		var out []string
		for _, c := range crds {
			if _, ok := a.namespaced[c]; !ok {
				out = append(out, c)
			}
		}
		return out
	}
	if len(missing()) > 0 && a.Now().Sub(a.lastRefresh) >= a.MinRefreshInterval {
		if err := a.refresh(); err != nil {
			return nil, nil, err
		}
	}
	for _, c := range crds {
		if ns, ok := a.namespaced[c]; ok && !ns {
			cluster = append(cluster, c)
		}
	}
	return cluster, missing(), nil
}

// refresh reads every API's scope from discovery. A group that fails to
// answer (an unavailable aggregated API) does not stop the others.
func (a *APIScopes) refresh() error {
	a.lastRefresh = a.Now()
	_, lists, err := a.Discovery.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("reading API discovery: %w", err)
	}
	for _, l := range lists {
		group, _, _ := strings.Cut(l.GroupVersion, "/")
		if !strings.Contains(l.GroupVersion, "/") {
			group = "" // the core group's version is just "v1"
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || group == "" {
				continue
			}
			a.namespaced[r.Name+"."+group] = r.Namespaced
		}
	}
	return nil
}

// NewAPIScopesForConfig returns an APIScopes reading the discovery of the
// API server cfg points at.
func NewAPIScopesForConfig(cfg *rest.Config) (*APIScopes, error) {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	return NewAPIScopes(d), nil
}
