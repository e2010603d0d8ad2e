package scopeinstance_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/publish"
	"github.com/operator-framework/oria/internal/testutil"
)

// workload returns a minimal Deployment with labels (no controller runs
// it here: only its pod template's annotations are looked at).
func workload(ns, name string, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "op", Image: "operator:latest"}}},
			},
		},
	}
}

// TestPublication: the ConfigMap lists the operator's namespace and the
// namespaces whose bindings exist; the labelled Deployment is restarted
// once per change (its pod template annotation is the list's hash), the
// unlabelled one never; a namespace that stops matching leaves the list;
// removing the block withdraws the key and deletes the ConfigMap oria
// created.
func TestPublication(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	team := testutil.UniqueName("team")
	op := namespace(t, "op", nil)
	a := namespace(t, "pub-a", map[string]string{"team": team})
	b := namespace(t, "pub-b", nil)
	restarted := workload(op, "operator", map[string]string{"intent": "projected"})
	create(t, restarted)
	untouched := workload(op, "other", nil)
	create(t, untouched)

	view := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}}, testutil.ServiceAccount("operator", op))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels("team", team))
	si.Spec.Publication = &oriav1alpha1.Publication{
		ConfigMap:     oriav1alpha1.ConfigMapKeyReference{Namespace: op, Name: "scope"},
		RestartLabels: map[string]string{"intent": "projected"},
	}
	create(t, si)

	// published waits until the key is want, checks that every namespace
	// of it but the operator's has its binding, and that the labelled
	// Deployment was restarted for it.
	published := func(want ...string) string {
		t.Helper()
		slices.Sort(want)
		var hash string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cm := get(c, "scope", op, &corev1.ConfigMap{})
			assert.Equal(c, strings.Join(want, ","), cm.Data["namespaces"])
			got := get(c, si.Name, "", &oriav1alpha1.ScopeInstance{})
			if assert.NotNil(c, got.Status.Publication) {
				hash = got.Status.Publication.Hash
				assert.Equal(c, publish.Hash(strings.Join(want, ",")), hash)
				assert.Equal(c, hash, got.Status.Publication.RestartedHash)
				assert.Equal(c, []string{"Deployment/operator"}, got.Status.Publication.RestartedWorkloads)
				assert.EqualValues(c, len(want), got.Status.Publication.LastRestartNamespaces)
			}
		}, testutil.Timeout, testutil.Interval)
		for _, ns := range want {
			if ns != op {
				get(t, binding.BindingName(si.Name, view), ns, &rbacv1.RoleBinding{})
			}
		}
		d := get(t, restarted.Name, op, &appsv1.Deployment{})
		assert.Equal(t, hash, d.Spec.Template.Annotations[oriav1alpha1.AnnotationRestartedFor])
		return hash
	}
	published(op, a)
	gen := get(t, restarted.Name, op, &appsv1.Deployment{}).Generation

	// A namespace labelled to match: one more restart.
	ns := testutil.Namespace(b, nil)
	update(t, ns, func() { ns.Labels = map[string]string{"team": team} })
	published(op, a, b)
	time.Sleep(2 * time.Second) // longer than the quiet period: no restart follows
	assert.Equal(t, gen+1, get(t, restarted.Name, op, &appsv1.Deployment{}).Generation, "one restart per change")
	assert.Empty(t, get(t, untouched.Name, op, &appsv1.Deployment{}).Spec.Template.Annotations, "an unlabelled workload is not restarted")

	// An unchanged world: no write, to the ConfigMap, the workloads or the
	// status.
	r, counter := countingReconciler(t)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: si.Name}}
	testutil.EventuallyQuiet(t, r, counter, req)
	testutil.Quiet(t, r, counter, req, 3)

	// A namespace that stops matching leaves the list (and then loses its
	// binding).
	ns = testutil.Namespace(a, nil)
	update(t, ns, func() { delete(ns.Labels, "team") })
	published(op, b)
	eventuallyBoundIn(t, si.Name, view, b)

	// Someone else's key in the same ConfigMap survives oria; removing the
	// block withdraws oria's key and leaves theirs.
	cm := get(t, "scope", op, &corev1.ConfigMap{})
	cm.Data["theirs"] = "x"
	require.NoError(t, k8sClient.Update(ctx, cm, client.FieldOwner("someone")))
	got := get(t, si.Name, "", &oriav1alpha1.ScopeInstance{})
	update(t, got, func() { got.Spec.Publication = nil })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := get(c, "scope", op, &corev1.ConfigMap{})
		assert.Equal(c, map[string]string{"theirs": "x"}, cm.Data)
		assert.NotContains(c, cm.Annotations, publish.AnnotationKey(si.Name))
		assert.Nil(c, get(c, si.Name, "", &oriav1alpha1.ScopeInstance{}).Status.Publication)
	}, testutil.Timeout, testutil.Interval)
}

// TestPublicationConflict: a key someone else manages is reported as a
// Conflict and left as it was; deleting the instance leaves it too. A
// ConfigMap oria created is handed to the garbage collector with the
// instance: oria withdraws its key, and the ConfigMap's ownerReference to
// the deleted instance, set when oria created it, has the garbage
// collector delete it (this control plane runs none; test/e2e
// TestPublicationForgedMetadata sees it go).
func TestPublicationConflict(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	op := namespace(t, "op", nil)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: op, Name: "theirs"}, Data: map[string]string{"namespaces": "kube-system"}}
	create(t, foreign)

	view := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}}, testutil.ServiceAccount("operator", op))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{op}, nil)
	si.Spec.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: op, Name: "theirs"}}
	create(t, si)
	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict)
	assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, oriav1alpha1.TypeReady).Message, `key "namespaces" of ConfigMap `+op+"/theirs is managed by someone else")
	after := get(t, "theirs", op, &corev1.ConfigMap{})
	assert.Equal(t, foreign.Data, after.Data)
	assert.Empty(t, after.Annotations)
	assert.Equal(t, []string{op}, got.Status.BoundNamespaces, "the bindings are in place all the same")

	// Another ConfigMap: published (the conflict is over), and deleted with
	// the instance since oria created it.
	update(t, got, func() { got.Spec.Publication.ConfigMap.Name = "mine" })
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	assert.Equal(t, op, get(t, "mine", op, &corev1.ConfigMap{}).Data["namespaces"])
	require.NoError(t, k8sClient.Delete(ctx, got))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		if notFound("mine", op, cm) {
			return // a garbage collector did its work
		}
		assert.Empty(c, cm.Data)
		assert.NotContains(c, cm.Annotations, publish.AnnotationKey(si.Name))
		assert.Equal(c, []metav1.OwnerReference{publish.OwnerReference(got)}, cm.OwnerReferences)
	}, testutil.Timeout, testutil.Interval)
	assert.Equal(t, foreign.Data, get(t, "theirs", op, &corev1.ConfigMap{}).Data)
}

// TestPublicationOfAGoneInstance: a ConfigMap key of an instance deleted
// while oria was not running is withdrawn when oria sees the ConfigMap (at
// start, or on any change), with its label and annotation. The ConfigMap
// stays: its label, annotation and field managers say "oria published
// here" but anyone who may patch it can write them (issue 29, case 7).
// oria deletes only what it created, by the ownerReference it set at
// creation; for a deleted instance that is the garbage collector's work.
func TestPublicationOfAGoneInstance(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	op := namespace(t, "op", nil)
	ghost := testutil.UniqueName("ghost")
	ref := oriav1alpha1.ConfigMapKeyReference{Namespace: op, Name: "left-behind"}
	require.NoError(t, k8sClient.Apply(ctx, publish.ConfigMap(ghost, ref, op, ""), client.FieldOwner(publish.FieldOwner(ghost))))
	uid := get(t, ref.Name, op, &corev1.ConfigMap{}).UID
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		if !assert.NoError(c, k8sClient.Get(ctx, types.NamespacedName{Namespace: op, Name: ref.Name}, cm), "deleted") {
			return
		}
		assert.Empty(c, cm.Data)
		assert.NotContains(c, cm.Labels, oriav1alpha1.LabelPublished)
		assert.NotContains(c, cm.Annotations, publish.AnnotationKey(ghost))
	}, testutil.Timeout, testutil.Interval)
	time.Sleep(time.Second)
	assert.Equal(t, uid, get(t, ref.Name, op, &corev1.ConfigMap{}).UID, "the ConfigMap was deleted")
}
