package noolm

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/admission"
	"github.com/operator-framework/oria/internal/metrics"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/testutil"
)

// quietFor is how long oria runs without OLM v1 before its log is read:
// controller-runtime retried a missing kind every 10 s, so twice that shows
// a repeat.
const quietFor = 20 * time.Second

// noMatch is how controller-runtime (and the API machinery) report a kind
// the API server does not serve; oria's log must never carry it.
const noMatch = `no matches for kind`

// TestStartWithoutOLM: oria started on a cluster without OLM v1 is ready,
// binds a ScopeInstance (checked with SubjectAccessReviews), its guard
// refuses an escalation, an RBACPolicy reports OLMNotInstalled, and its
// log says once, in 20 s, that OLM v1 is missing, with no "no matches for
// kind" error. The ClusterExtension CRD installed later starts the
// extension controller without a restart: an extension in Legacy mode gets
// its generated roles, and the policy binds them.
func TestStartWithoutOLM(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := testutil.CreateNamespace(t, k8sClient, "noolm", nil)

	// Ready without OLM v1: the guard and the binding layer serve.
	code, body := httpGet(t, oria.HealthURL+"/readyz?verbose")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 0.0, olmGauge(t), metrics.OLMAPIAvailable)

	// A ScopeInstance is bound.
	reader := testutil.UniqueName("reader")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("noolm"),
		[]oriav1alpha1.ClusterRoleTemplate{{GenerateName: "pod-reader-", Rules: testutil.PodReaderRules()}}, testutil.User(reader))
	si := &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name},
		Spec:       oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: tmpl.Name, Namespaces: []string{ns}},
	}
	testutil.Create(t, k8sClient, tmpl)
	testutil.Create(t, k8sClient, si)
	testutil.EventuallyCondition(t, k8sClient, si, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound})
	eventuallyAllowed(t, testutil.Access{User: reader, Verb: "list", Resource: "pods", Namespace: ns})
	assert.False(t, allowed(t, testutil.Access{User: reader, Verb: "list", Resource: "pods", Namespace: "default"}), "only where the instance binds")

	// The guard serves: a delegated user cannot grant what they lack.
	asDelegate := delegate(t)
	secrets := testutil.ScopeTemplate(testutil.UniqueName("secrets"), []oriav1alpha1.ClusterRoleTemplate{{Name: testutil.UniqueName("secrets"), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"})
	err := asDelegate.Create(ctx, secrets)
	require.Error(t, err, "the guard must refuse")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), `admission webhook "`+admission.WebhookName+`" denied the request`)
	assert.Contains(t, err.Error(), "missing: get secrets")

	// An RBACPolicy says why it grants nothing.
	ext := testutil.UniqueName("noolm")
	viewer := testutil.UniqueName("viewer")
	policy := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("noolm")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{testutil.User(viewer)}, Namespaces: []string{ns}},
	}
	testutil.Create(t, k8sClient, policy)
	testutil.EventuallyCondition(t, k8sClient, policy, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse,
		Reason: oriav1alpha1.ReasonOLMNotInstalled, Message: []string{olm.ClusterExtensionCRD, ext}})

	// Said once, never an error about the missing kind.
	time.Sleep(time.Until(oriaStarted.Add(quietFor)))
	t.Logf("oria ran %v without OLM v1", time.Since(oriaStarted).Round(time.Second))
	assertLog(t, 1, 0)

	// OLM v1's CRD arrives: the gate opens without a restart.
	crd, err := clusterExtensionCRD()
	require.NoError(t, err)
	require.NoError(t, k8sClient.Create(ctx, crd))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), got))
		assert.True(c, established(got), "the ClusterExtension CRD is not established yet")
	}, testutil.Timeout, testutil.Interval)
	installed := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1.0, olmGauge(c), metrics.OLMAPIAvailable)
	}, testutil.Timeout, testutil.Interval)
	t.Logf("the extension controllers started %v after the CRD was established (the gate asks every %v)",
		time.Since(installed).Round(100*time.Millisecond), olm.DefaultCheckInterval)
	// Every policy is looked at again: the extension is now merely missing.
	testutil.EventuallyCondition(t, k8sClient, policy, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse,
		Reason: oriav1alpha1.ReasonExtensionNotFound})

	// An extension in Legacy mode, as operator-controller leaves it: its
	// roles are generated, and the policy binds the view role.
	ce := testutil.ClusterExtension(ext, oriav1alpha1.RBACModeLegacy)
	api := testutil.CRD(testutil.UniqueName("noolm")+".example.com", "gizmos", "Gizmo", ext)
	testutil.Create(t, k8sClient, ce)
	testutil.Create(t, k8sClient, api)
	testutil.EventuallyCondition(t, k8sClient, ce, testutil.Condition{Type: oriav1alpha1.TypeRBACManaged, Status: metav1.ConditionTrue,
		Reason: oriav1alpha1.ReasonLegacy})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		roles := generatedRoles(c, ce.UID)
		assert.GreaterOrEqual(c, len(roles), 3, "generated roles of %s: %v", ext, roles)
	}, testutil.Timeout, testutil.Interval)
	testutil.EventuallyCondition(t, k8sClient, policy, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue,
		Reason: oriav1alpha1.ReasonBound})
	eventuallyAllowed(t, testutil.Access{User: viewer, Verb: "list", Group: api.Spec.Group, Resource: "gizmos", Namespace: ns})
	assert.False(t, allowed(t, testutil.Access{User: viewer, Verb: "delete", Group: api.Spec.Group, Resource: "gizmos", Namespace: ns}), "view only")

	assertLog(t, 1, 1)
}

// assertLog checks oria's log: the missing-OLM message and the served one
// each logged as often as wanted, and no "no matches for kind".
func assertLog(t *testing.T, missing, served int) {
	t.Helper()
	b, err := os.ReadFile(oria.LogPath)
	require.NoError(t, err)
	log := string(b)
	assert.Equal(t, missing, strings.Count(log, olm.MissingMessage), "lines saying OLM v1 is missing")
	assert.Equal(t, served, strings.Count(log, olm.ServedMessage), "lines saying the ClusterExtension API is served")
	assert.Equal(t, 0, strings.Count(log, noMatch), "lines with %q", noMatch)
	for line := range strings.Lines(log) {
		if strings.Contains(line, olm.MissingMessage) {
			t.Logf("oria said: %s", strings.TrimSpace(line))
		}
	}
}

// generatedRoles are the ClusterRoles whose controller is the
// ClusterExtension of uid.
func generatedRoles(c *assert.CollectT, uid types.UID) []string {
	list := &rbacv1.ClusterRoleList{}
	if !assert.NoError(c, k8sClient.List(context.Background(), list)) {
		return nil
	}
	var out []string
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == uid {
			out = append(out, r.Name)
		}
	}
	return out
}

// olmGauge scrapes oria_olm_api_available (-1 when it is not there).
func olmGauge(t require.TestingT) float64 {
	code, body := httpGet(t, oria.MetricsURL)
	require.Equal(t, http.StatusOK, code)
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), metrics.OLMAPIAvailable+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return -1
}

func httpGet(t require.TestingT, url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return resp.StatusCode, b.String()
}

// allowed asks the real authorizer (a SubjectAccessReview).
func allowed(t require.TestingT, a testutil.Access) bool {
	ok, err := testutil.Allowed(context.Background(), k8sClient, a)
	require.NoError(t, err)
	return ok
}

// eventuallyAllowed waits until the authorizer allows a (RBAC changes reach
// it through its informers).
func eventuallyAllowed(t *testing.T, a testutil.Access) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, allowed(c, a), "%s", a)
	}, testutil.Timeout, testutil.Interval)
}

// delegate returns a client acting as a user who may create oria's kinds
// and holds nothing else.
func delegate(t *testing.T) client.Client {
	t.Helper()
	name := testutil.UniqueName("delegate")
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "oria-noolm-" + name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{oriav1alpha1.GroupVersion.Group},
			Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies"},
			Verbs:     []string{"create", "update"},
		}},
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{testutil.User(name)},
	}
	testutil.Create(t, k8sClient, role)
	testutil.Create(t, k8sClient, crb)
	eventuallyAllowed(t, testutil.Access{User: name, Verb: "create", Group: oriav1alpha1.GroupVersion.Group, Resource: "scopetemplates"})
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	c, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	require.NoError(t, err)
	return c
}

// established reports whether crd's Established condition is True.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
