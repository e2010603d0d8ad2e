package extension_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

var (
	cluster *localcluster.Cluster
	// k8sClient is an uncached admin client: what tests assert on is the
	// API server's state, not a cache.
	k8sClient client.Client
)

func TestMain(m *testing.M) {
	testutil.RunMain(m, &cluster, localcluster.Options{}, func() (func(int), error) {
		var err error
		k8sClient, err = testutil.AdminClient(cluster)
		return nil, err
	})
}

// env is one running manager with only this package's controller.
type env struct {
	mgr ctrl.Manager
	// deps are the controller's, as controller.SetupAll makes them: a
	// Reconciler a test builds shares them (its Memo, as the controller's
	// memory of conflicts).
	deps extension.Deps
	opts extension.Options
	stop func()
}

// reconcilerOn returns a Reconciler of e's dependencies and options, with
// c as its client and a fake recorder.
func (e *env) reconcilerOn(t *testing.T, c client.Client) *extension.Reconciler {
	t.Helper()
	d := e.deps
	d.Client, d.Recorder = c, events.NewFakeRecorder(100)
	r, err := extension.New(d, e.opts)
	require.NoError(t, err)
	return r
}

// startManager runs a manager with the extension controller until the test
// ends (or stop is called). Each test runs its own so that tests can choose
// the default mode; tests delete their ClusterExtensions when they end so
// that later managers have nothing of theirs to reconcile.
func startManager(t *testing.T, opts extension.Options) *env {
	t.Helper()
	// The controller runs with oria's own RBAC, not as cluster-admin.
	cfg, err := testutil.OriaConfig(context.Background(), cluster, k8sClient)
	require.NoError(t, err)
	var deps extension.Deps
	mgr, stopMgr, err := testutil.StartManager(cfg, func(m ctrl.Manager) error {
		s, err := controller.NewShared(m, engine.Unobserved)
		if err != nil {
			return err
		}
		deps = s.ExtensionDeps(m)
		return extension.SetupWithManager(m, deps, opts)
	})
	require.NoError(t, err)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stopMgr()
	}
	t.Cleanup(stop)
	return &env{mgr: mgr, deps: deps, opts: opts, stop: stop}
}

// newExtension creates a ClusterExtension (annotated with mode unless mode
// is empty) and deletes it when the test ends.
func newExtension(t *testing.T, mode oriav1alpha1.RBACMode) *ocv1.ClusterExtension {
	t.Helper()
	ce := testutil.ClusterExtension(testutil.UniqueName("ext"), mode)
	testutil.Create(t, k8sClient, ce)
	return ce
}

// group returns an API group of this test's own.
func group() string { return testutil.UniqueName("g") + ".example.com" }

// addCRD creates the CRD named plural.group for the extension, labelled as
// operator-controller labels the CRDs it installs.
func addCRD(t *testing.T, ext, crdName string) *metav1.PartialObjectMetadata {
	t.Helper()
	plural, grp, _ := strings.Cut(crdName, ".")
	crd := testutil.CRD(grp, plural, "K"+plural, ext)
	testutil.Create(t, k8sClient, crd)
	return &metav1.PartialObjectMetadata{ObjectMeta: crd.ObjectMeta}
}

func deleteCRD(t *testing.T, crdName string) {
	t.Helper()
	crd := lookup.CRDMetadata()
	crd.Name = crdName
	require.NoError(t, k8sClient.Delete(context.Background(), crd))
}

// installed creates a ClusterExtension in mode with the given CRDs.
func installed(t *testing.T, mode oriav1alpha1.RBACMode, crds ...string) *ocv1.ClusterExtension {
	t.Helper()
	ce := newExtension(t, mode)
	for _, c := range crds {
		addCRD(t, ce.Name, c)
	}
	return ce
}

// setMode sets (or, with "", removes) the rbac-mode annotation.
func setMode(t *testing.T, name string, mode oriav1alpha1.RBACMode) {
	t.Helper()
	testutil.SetRBACMode(t, k8sClient, name, mode)
}

func getCE(t require.TestingT, name string) *ocv1.ClusterExtension {
	ce := &ocv1.ClusterExtension{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, ce))
	return ce
}

// waitCondition waits until the extension's RBACManaged condition has status
// and reason (and a message containing each of msg), and returns it.
func waitCondition(t *testing.T, name string, status metav1.ConditionStatus, reason string, msg ...string) metav1.Condition {
	t.Helper()
	_, cond := testutil.EventuallyCondition(t, k8sClient, &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: status, Reason: reason, Message: msg})
	return cond
}

// liveRoles returns the ClusterRoles labelled as oria's for the extension.
func liveRoles(t require.TestingT, ext string) map[string]*rbacv1.ClusterRole {
	list := &rbacv1.ClusterRoleList{}
	require.NoError(t, k8sClient.List(context.Background(), list, client.MatchingLabels{
		oriav1alpha1.LabelManaged:   oriav1alpha1.ManagedValue,
		oriav1alpha1.LabelExtension: names.LabelValue(ext),
	}))
	out := map[string]*rbacv1.ClusterRole{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// role is a ClusterRole, by name only.
func role(name string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func getRole(t require.TestingT, name string) *rbacv1.ClusterRole {
	cr := &rbacv1.ClusterRole{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, cr))
	return cr
}

func roleGone(name string) bool {
	return apierrors.IsNotFound(k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}))
}

// roleNames returns the generated role names for the CRDs, sorted, minus
// the names in except.
func roleNames(crds []string, except ...string) []string {
	out := []string{}
	for _, c := range crds {
		for _, k := range names.RoleKinds {
			if n := names.ExtensionRole(c, k); !slices.Contains(except, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitRoles waits until the extension's oria roles are exactly the
// generated roles of crds (minus except) in mode, with the rules, labels,
// annotation and owner of design.md, and returns them.
func waitRoles(t *testing.T, ce *ocv1.ClusterExtension, mode oriav1alpha1.RBACMode, crds []string, except ...string) map[string]*rbacv1.ClusterRole {
	t.Helper()
	var roles map[string]*rbacv1.ClusterRole
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		roles = liveRoles(c, ce.Name)
		got := make([]string, 0, len(roles))
		for n := range roles {
			got = append(got, n)
		}
		slices.Sort(got)
		require.Equal(c, roleNames(crds, except...), got)
		for _, crd := range crds {
			plural, grp := names.SplitCRDName(crd)
			for _, k := range names.RoleKinds {
				cr, ok := roles[names.ExtensionRole(crd, k)]
				if !ok {
					continue
				}
				assert.Equal(c, string(k), cr.Labels[oriav1alpha1.LabelRole])
				assert.Equal(c, crd, cr.Annotations[oriav1alpha1.AnnotationCRD])
				ref := metav1.GetControllerOf(cr)
				if assert.NotNil(c, ref) {
					assert.Equal(c, ce.UID, ref.UID)
				}
				for _, agg := range []string{oriav1alpha1.LabelAggregateToAdmin, oriav1alpha1.LabelAggregateToEdit, oriav1alpha1.LabelAggregateToView} {
					want := mode == oriav1alpha1.RBACModeLegacy && agg == extension.AggregationLabel(k)
					_, has := cr.Labels[agg]
					assert.Equal(c, want, has, "%s: label %s", cr.Name, agg)
				}
				want := rbacv1.PolicyRule{APIGroups: []string{grp}, Resources: []string{plural}}
				switch k {
				case names.RoleAdmin:
					want.Verbs = []string{"*"}
				case names.RoleEdit:
					want.Verbs = []string{"create", "update", "patch", "delete"}
				case names.RoleView:
					want.Verbs = []string{"get", "list", "watch"}
				case names.RoleViewCRDView:
					want = rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
						ResourceNames: []string{crd}, Verbs: []string{"get"}}
				}
				assert.Equal(c, []rbacv1.PolicyRule{want}, cr.Rules, cr.Name)
			}
		}
	}, testutil.Timeout, testutil.Interval)
	return roles
}

// waitCacheSynced waits until the manager's cache shows the extension, its
// CRDs and its oria roles exactly as the API server has them, so that a
// direct Reconcile sees the converged world.
func waitCacheSynced(t *testing.T, e *env, name string) {
	t.Helper()
	cached := e.mgr.GetClient()
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		live, inCache := &ocv1.ClusterExtension{}, &ocv1.ClusterExtension{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Name: name}, live))
		require.NoError(c, cached.Get(ctx, client.ObjectKey{Name: name}, inCache))
		require.Equal(c, live.ResourceVersion, inCache.ResourceVersion)

		rv := func(l *rbacv1.ClusterRoleList) map[string]string {
			m := map[string]string{}
			for _, cr := range l.Items {
				m[cr.Name] = cr.ResourceVersion
			}
			return m
		}
		sel := client.MatchingLabels{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}
		lr, cr := &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleList{}
		require.NoError(c, k8sClient.List(ctx, lr, sel))
		require.NoError(c, cached.List(ctx, cr, sel))
		require.Equal(c, rv(lr), rv(cr))

		crdSel := client.MatchingLabels{oriav1alpha1.LabelOLMOwnerName: name}
		lc, cc := &metav1.PartialObjectMetadataList{}, &metav1.PartialObjectMetadataList{}
		for _, l := range []*metav1.PartialObjectMetadataList{lc, cc} {
			l.SetGroupVersionKind(lookup.CRDMetadata().GroupVersionKind().GroupVersion().WithKind("CustomResourceDefinitionList"))
		}
		require.NoError(c, k8sClient.List(ctx, lc, crdSel))
		require.NoError(c, cached.List(ctx, cc, crdSel))
		crv := func(l *metav1.PartialObjectMetadataList) map[string]string {
			m := map[string]string{}
			for _, o := range l.Items {
				m[o.Name] = o.ResourceVersion
			}
			return m
		}
		require.Equal(c, crv(lc), crv(cc))
	}, testutil.Timeout, testutil.Interval)
}

// assertQuiet reconciles the converged extension directly, through a client
// that counts writes, and fails on any write: an unchanged world must cost
// the API server nothing but (cached) reads.
func assertQuiet(t *testing.T, e *env, name string) {
	t.Helper()
	waitCacheSynced(t, e, name)
	c, writes := testutil.CountingClient(e.mgr.GetClient())
	r := e.reconcilerOn(t, c)
	testutil.Quiet(t, r, writes, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}, 3)
}

// uids returns name -> UID of roles.
func uids(roles map[string]*rbacv1.ClusterRole) map[string]types.UID {
	out := map[string]types.UID{}
	for n, r := range roles {
		out[n] = r.UID
	}
	return out
}
