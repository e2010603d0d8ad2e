package olm

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// idleWindow is how long both controllers must stay quiet.
const idleWindow = 60 * time.Second

// TestNoFight: with an extension in Legacy mode (oria labels the bundle's
// role, which operator-controller owns and corrects) and one in
// FineGrained mode with a policy, once everything has converged, a minute
// with both controllers running brings no write from oria, no reconcile of
// a ClusterExtension by operator-controller, and no write at all to the
// objects either controller manages, as the API server's watch reports.
func TestNoFight(t *testing.T) {
	testutil.NeedCluster(t)
	legacy, fine := newPackage("idle-legacy"), newPackage("idle-fine")
	serveCatalog(t, legacy, release{version: "1.0.0", apis: apisV1})
	serveCatalog(t, fine, release{version: "1.0.0", apis: apisV1})
	install(t, legacy, oriav1alpha1.RBACModeLegacy, "")
	install(t, fine, oriav1alpha1.RBACModeFineGrained, "")
	bindBuiltin(t, "view", "idle-viewer", legacy.name)
	pol := policy(t, fine, oriav1alpha1.AccessView, "idle-bob", []string{fine.name}, widgets, gadgets)

	waitRBACManaged(t, legacy.name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	waitRBACManaged(t, fine.name, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
	eventuallyRoles(t, legacy.name, wantRoles(legacy, apisV1))
	eventuallyRoles(t, fine.name, wantRoles(fine, apisV1))
	waitPolicy(t, pol.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	eventuallyAccess(t, true,
		access(legacy, "idle-viewer", "list", widgets, legacy.name),
		access(legacy, "idle-viewer", "list", gadgets, legacy.name),
		access(fine, "idle-bob", "list", widgets, fine.name),
	)

	w := watchWrites(t, []string{legacy.name, fine.name})
	// Converged: ten seconds without a write to anything watched.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := w.count()
		time.Sleep(10 * time.Second)
		assert.Equal(c, n, w.count(), "writes while settling: %v", w.since(n))
	}, 3*time.Minute, time.Second, "the cluster did not settle")

	start := w.count()
	oriaBefore := sumMetric(t, oria.MetricsURL, "", "oria_writes_total", nil)
	ocBefore := sumMetric(t, ocMetricsURL, metricsToken, "controller_runtime_reconcile_total", map[string]string{"controller": underTest.ceController})
	t.Logf("idle for %s: oria has written %v times so far, operator-controller reconciled ClusterExtensions %v times", idleWindow, oriaBefore, ocBefore)
	time.Sleep(idleWindow)
	oriaWrites := sumMetric(t, oria.MetricsURL, "", "oria_writes_total", nil) - oriaBefore
	ocReconciles := sumMetric(t, ocMetricsURL, metricsToken, "controller_runtime_reconcile_total", map[string]string{"controller": underTest.ceController}) - ocBefore
	writes := w.since(start)
	t.Logf("in %s: oria writes %v, operator-controller ClusterExtension reconciles %v, writes seen by the API server %d", idleWindow, oriaWrites, ocReconciles, len(writes))
	assert.Zero(t, oriaWrites, "oria_writes_total grew while idle")
	assert.Zero(t, ocReconciles, "operator-controller reconciled ClusterExtensions while idle")
	assert.Empty(t, writes, "writes while idle")
}

// writeWatch counts the writes the API server reports (watch events) to
// what the two controllers manage: ClusterExtensions, ClusterCatalogs,
// CRDs, ClusterRoles and ClusterRoleBindings, oria's kinds, Helm's release
// Secrets in OLM's namespace, and the RoleBindings, ServiceAccounts and
// Deployments of the given namespaces.
type writeWatch struct {
	mu     sync.Mutex
	events []string
}

func (w *writeWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

func (w *writeWatch) since(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events[n:])
}

func watchWrites(t *testing.T, namespaces []string) *writeWatch {
	t.Helper()
	return watchWritesOf(t, namespaces, "")
}

// watchWritesOf is watchWrites counting only the writes to objects whose
// name or namespace contains only (everything when empty): one test's
// objects, all named after its package, and not the clean-up of the tests
// before it, which kube-controller-manager's garbage collector may still be
// carrying out (it pauses while it re-syncs after CRDs come and go).
func watchWritesOf(t *testing.T, namespaces []string, only string) *writeWatch {
	t.Helper()
	mc, err := metadata.NewForConfig(cluster.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &writeWatch{}
	type target struct {
		gvr schema.GroupVersionResource
		ns  []string // nil: every namespace (or cluster-scoped)
	}
	olm := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "olm.operatorframework.io", Version: "v1", Resource: r}
	}
	oriaGVR := func(r string) schema.GroupVersionResource {
		return oriav1alpha1.GroupVersion.WithResource(r)
	}
	rbac := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: r}
	}
	targets := []target{
		{gvr: olm("clusterextensions")},
		{gvr: olm("clustercatalogs")},
		{gvr: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}},
		{gvr: rbac("clusterroles")},
		{gvr: rbac("clusterrolebindings")},
		{gvr: oriaGVR("rbacpolicies")},
		{gvr: oriaGVR("scopetemplates")},
		{gvr: oriaGVR("scopeinstances")},
		{gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, ns: []string{systemNamespace}},
		{gvr: rbac("rolebindings"), ns: namespaces},
		{gvr: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, ns: namespaces},
		{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ns: namespaces},
	}
	for _, tg := range targets {
		nss := tg.ns
		if nss == nil {
			nss = []string{metav1.NamespaceAll}
		}
		for _, ns := range nss {
			ri := mc.Resource(tg.gvr).Namespace(ns)
			list, err := ri.List(ctx, metav1.ListOptions{})
			require.NoError(t, err, "listing %s", tg.gvr)
			wi, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			require.NoError(t, err, "watching %s", tg.gvr)
			go func() {
				defer wi.Stop()
				for ev := range wi.ResultChan() {
					if ev.Type == watch.Bookmark || ev.Type == watch.Error {
						continue
					}
					m, ok := ev.Object.(metav1.Object)
					if !ok || only != "" && !strings.Contains(m.GetName(), only) && !strings.Contains(m.GetNamespace(), only) {
						continue
					}
					manager := ""
					var last time.Time
					for _, f := range m.GetManagedFields() {
						if f.Time != nil && !f.Time.Time.Before(last) {
							last, manager = f.Time.Time, f.Manager+" "+string(f.Operation)
						}
					}
					w.mu.Lock()
					w.events = append(w.events, fmt.Sprintf("%s %s %s/%s (last manager: %s)", ev.Type, tg.gvr.Resource, m.GetNamespace(), m.GetName(), manager))
					w.mu.Unlock()
				}
			}()
		}
	}
	return w
}

// sumMetric scrapes url (with a bearer token when not empty) and sums the
// series of the counter name whose labels include labels.
func sumMetric(t *testing.T, url, token, name string, labels map[string]string) float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Do(req)
	require.NoError(t, err, "scraping %s", url)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "scraping %s: %s", url, body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	f, ok := families[name]
	require.True(t, ok, "%s has no %s", url, name)
	var sum float64
	found := false
series:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == k && l.GetValue() == v
			}) {
				continue series
			}
		}
		found = true
		sum += m.GetCounter().GetValue()
	}
	require.True(t, found, "%s has no %s%v", url, name, labels)
	return sum
}
