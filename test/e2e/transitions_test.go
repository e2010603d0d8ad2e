package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// eventsOf counts the events of type regarding the oria object of kind and
// name, by reason, from the events.k8s.io API (a repeat recorded as a
// series counts as many times as it was seen).
func eventsOf(t require.TestingT, eventType, kind, name string) map[string]int32 {
	var list eventsv1.EventList
	require.NoError(t, k8sClient.List(context.Background(), &list))
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Type != eventType || e.Regarding.Kind != kind || e.Regarding.Name != name {
			continue
		}
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		out[e.Reason] += n
	}
	return out
}

// eventuallyWarnings waits until the object's Warning events are exactly
// want, then checks that they stay so while nothing changes.
func eventuallyWarnings(t *testing.T, kind, name string, want map[string]int32) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, eventsOf(c, corev1.EventTypeWarning, kind, name))
	}, testutil.Timeout, testutil.Interval, "Warning events of %s %s", kind, name)
	time.Sleep(3 * time.Second) // reconciles of an unchanged state (status writes, resyncs) add none
	assert.Equal(t, want, eventsOf(t, corev1.EventTypeWarning, kind, name), "Warning events of %s %s repeated", kind, name)
}

// TestWarningEventsEndToEnd: on the real oria, `kubectl describe` of each
// kind shows one Warning per transition into a not-Ready reason, none while
// nothing changes or once Ready, and no Normal event twice.
func TestWarningEventsEndToEnd(t *testing.T) {
	runsBeside(t)
	ns := createNamespace(t, "warn", nil)
	missing := testutil.UniqueName("warn-later")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("warn"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("warn-user"))
	si := scopeInstance(testutil.UniqueName("warn"), tmpl.Name, ns, missing)
	testutil.Create(t, k8sClient, tmpl)
	testutil.Create(t, k8sClient, si)
	instanceReady(t, si, oriav1alpha1.ReasonNamespaceNotFound, time.Minute)
	eventuallyWarnings(t, "ScopeInstance", si.Name, map[string]int32{oriav1alpha1.ReasonNamespaceNotFound: 1})
	// The binding in ns, created once, is told once.
	assert.Equal(t, map[string]int32{"BindingsCreated": 1}, eventsOf(t, corev1.EventTypeNormal, "ScopeInstance", si.Name))

	// A change that keeps the reason: no new Warning.
	update(t, si, func() { si.Labels = map[string]string{"touched": "yes"} })
	eventuallyWarnings(t, "ScopeInstance", si.Name, map[string]int32{oriav1alpha1.ReasonNamespaceNotFound: 1})

	// Ready: nothing to warn about; each Normal event once.
	testutil.Create(t, k8sClient, testutil.Namespace(missing, nil))
	instanceReady(t, si, oriav1alpha1.ReasonBound, time.Minute)
	eventuallyWarnings(t, "ScopeInstance", si.Name, map[string]int32{oriav1alpha1.ReasonNamespaceNotFound: 1})
	assert.Equal(t, map[string]int32{"BindingsCreated": 2}, eventsOf(t, corev1.EventTypeNormal, "ScopeInstance", si.Name),
		"one more binding created, one more Normal event")

	// A new problem: one more Warning.
	update(t, si, func() { si.Spec.ScopeTemplateName = testutil.UniqueName("no-such-template") })
	instanceReady(t, si, oriav1alpha1.ReasonTemplateNotFound, time.Minute)
	eventuallyWarnings(t, "ScopeInstance", si.Name,
		map[string]int32{oriav1alpha1.ReasonNamespaceNotFound: 1, oriav1alpha1.ReasonTemplateNotFound: 1})

	// The other two kinds: a template naming a ClusterRole that does not
	// exist, a policy for an extension that is not installed.
	bad := testutil.ScopeTemplate(testutil.UniqueName("warn-norole"), []oriav1alpha1.ClusterRoleTemplate{{Name: testutil.UniqueName("no-such-role")}}, testutil.User("warn-user"))
	testutil.Create(t, k8sClient, bad)
	testutil.EventuallyCondition(t, k8sClient, bad, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonClusterRoleNotFound})
	eventuallyWarnings(t, "ScopeTemplate", bad.Name, map[string]int32{oriav1alpha1.ReasonClusterRoleNotFound: 1})
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("warn")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: testutil.UniqueName("not-installed"), Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{testutil.User("warn-user")}, Namespaces: []string{ns}},
	}
	testutil.Create(t, k8sClient, p)
	testutil.EventuallyCondition(t, k8sClient, p, testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonExtensionNotFound})
	eventuallyWarnings(t, "RBACPolicy", p.Name, map[string]int32{oriav1alpha1.ReasonExtensionNotFound: 1})
}

// TestInvalidModeEndToEnd: an invalid mode annotation (legacy, not Legacy)
// on an extension with a FineGrained grant in force: the extension says
// InvalidMode, the policy stays Bound and names the annotation, the grant
// stays (the authorizer still allows it, the ScopeInstance stays Bound);
// fixing the annotation drops the note, and Unmanaged revokes it.
func TestInvalidModeEndToEnd(t *testing.T) {
	testutil.NeedCluster(t)
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	ext := crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	ns := createNamespace(t, "invalid-mode", nil)
	p := &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("invalid-mode")},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: oriav1alpha1.AccessView,
			Subjects: []rbacv1.Subject{testutil.User("mode-user")}, Namespaces: []string{ns}},
	}
	testutil.Create(t, k8sClient, p)
	waitPolicyBound(t, p.Name)
	user := testutil.Access{User: "mode-user", Verb: "list", Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Namespace: ns}
	eventuallyAccess(t, true, user)

	testutil.SetRBACMode(t, k8sClient, ext, "legacy")
	waitExtensionCondition(t, ext, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidMode)
	got, cond := testutil.EventuallyCondition(t, k8sClient, p, testutil.Condition{Type: oriav1alpha1.TypeReady,
		Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound, Message: []string{`"legacy"`}})
	t.Log(cond.Message)
	time.Sleep(3 * time.Second) // nothing is revoked meanwhile
	assert.True(t, can(t, user), "the grant in force was revoked by an invalid mode")
	si := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: got.Status.ScopeInstanceName}, si))
	assert.Equal(t, []string{ns}, si.Status.BoundNamespaces)
	instanceReady(t, si, oriav1alpha1.ReasonBound, time.Second)

	testutil.SetRBACMode(t, k8sClient, ext, oriav1alpha1.RBACModeFineGrained)
	waitPolicyBound(t, p.Name)
	assert.True(t, can(t, user))
	testutil.SetRBACMode(t, k8sClient, ext, oriav1alpha1.RBACModeUnmanaged)
	testutil.EventuallyCondition(t, k8sClient, p, testutil.Condition{Type: oriav1alpha1.TypeReady, Reason: oriav1alpha1.ReasonExtensionUnmanaged})
	eventuallyAccess(t, false, user)
}

// TestPublicationNamespaceLaterEndToEnd: a publication into a namespace
// that does not exist yet reports PublicationNamespaceNotFound, naming the
// field, while the bindings are in place; once the namespace is created the
// list is published and the instance is Bound within seconds.
func TestPublicationNamespaceLaterEndToEnd(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	ns := createNamespace(t, "pub-later", nil)
	op := testutil.UniqueName("pub-op")
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("pub-later"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("pub-user"))
	si := scopeInstance(testutil.UniqueName("pub-later"), tmpl.Name, ns)
	si.Spec.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: op, Name: "watch"}}
	testutil.Create(t, k8sClient, tmpl)
	testutil.Create(t, k8sClient, si)
	cond := instanceReady(t, si, oriav1alpha1.ReasonPublicationNamespaceNotFound, time.Minute)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Contains(t, cond.Message, `namespace "`+op+`" (spec.publication.configMap.namespace) does not exist`)
	eventuallyAccess(t, true, testutil.Access{User: "pub-user", Verb: "list", Resource: "pods", Namespace: ns})
	time.Sleep(2 * time.Second)
	instanceReady(t, si, oriav1alpha1.ReasonPublicationNamespaceNotFound, time.Second)

	start := time.Now()
	testutil.Create(t, k8sClient, testutil.Namespace(op, nil))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Namespace: op, Name: "watch"}, cm))
		assert.ElementsMatch(c, []string{op, ns}, strings.Split(cm.Data["namespaces"], ","))
	}, 10*time.Second, testutil.Interval, "published within seconds of the namespace appearing")
	instanceReady(t, si, oriav1alpha1.ReasonBound, 10*time.Second)
	t.Logf("published and Bound %s after the namespace was created", time.Since(start).Round(time.Millisecond))
}
