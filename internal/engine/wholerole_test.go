package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// wholeRole is a ClusterRole oria writes whole, with rules or without.
func wholeRole(rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	inst := instance("inst")
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "whole",
			Labels:          ownership.InstanceLabels(inst.Name, "tmpl"),
			Annotations:     map[string]string{"example.com/roles": "pod-reader"},
			OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, inst.Name, inst.UID)},
			Finalizers:      []string{metav1.FinalizerDeleteDependents},
		},
		Rules: rules,
	}
}

func TestWholeClusterRoleKind(t *testing.T) {
	kind := engine.WholeClusterRoleKind()
	filled := wholeRole(podRules)
	empty := wholeRole(nil)

	for _, tc := range []struct {
		name     string
		cur      func() *rbacv1.ClusterRole
		want     *rbacv1.ClusterRole
		upToDate bool
	}{
		{"with rules as desired", filled.DeepCopy, filled, true},
		{"without rules as desired", empty.DeepCopy, empty, true},
		{"rules to remove", filled.DeepCopy, empty, false},
		{"rules to add", empty.DeepCopy, filled, false},
		{"a rule someone added", func() *rbacv1.ClusterRole {
			c := filled.DeepCopy()
			c.Rules = append(c.Rules, rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
			return c
		}, filled, false},
		{"a label someone added (an aggregated role could select it)", func() *rbacv1.ClusterRole {
			c := filled.DeepCopy()
			c.Labels = map[string]string{"team.example.com/aggregate": "true"}
			for k, v := range filled.Labels {
				c.Labels[k] = v
			}
			return c
		}, filled, false},
		{"an aggregationRule someone added", func() *rbacv1.ClusterRole {
			c := filled.DeepCopy()
			c.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{}}}
			return c
		}, filled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := tc.cur()
			assert.Equal(t, tc.upToDate, kind.UpToDate(cur, tc.want))
			merged, update := kind.Merge(cur, tc.want)
			require.True(t, update, "every change is an update of the whole role")
			assert.True(t, kind.UpToDate(merged, tc.want), "the update makes the role exactly as desired")
			assert.Equal(t, tc.want.Labels, merged.Labels)
			assert.Equal(t, tc.want.Annotations, merged.Annotations)
		})
	}
}

// TestWholeClusterRoleKindFinalizers: a role without its finalizer is not
// up to date and gains it by the update; a role being deleted never gains
// a finalizer (the API server refuses it). A binding without an owner
// reference that blocks another owner's deletion, or with one to an
// earlier UID, is not up to date, and the merge gives it the reference,
// its controller reference first, other references kept.
func TestWholeClusterRoleKindFinalizers(t *testing.T) {
	kind := engine.WholeClusterRoleKind()
	want := wholeRole(nil)
	old := want.DeepCopy()
	old.Finalizers = nil
	assert.False(t, kind.UpToDate(old, want), "a role without its finalizer")
	merged, _ := kind.Merge(old, want)
	assert.Equal(t, []string{metav1.FinalizerDeleteDependents}, merged.Finalizers)
	assert.True(t, kind.UpToDate(merged, want))
	deleting := old.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	merged, _ = kind.Merge(deleting, want)
	assert.Empty(t, merged.Finalizers, "no finalizer is added to a role being deleted")

	inst := instance("inst")
	rb := binding.RoleBindings(inst, "tmpl", []string{want.Name}, []rbacv1.Subject{sa("bot", "ns")}, []string{"ns"})[0]
	unheld := rb.DeepCopy()
	unheld.OwnerReferences = append(unheld.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other-uid"})
	rb.OwnerReferences = append(rb.OwnerReferences, metav1.OwnerReference{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole",
		Name: want.Name, UID: "role-uid", BlockOwnerDeletion: ptr.To(true)})
	assert.False(t, engine.RoleBindingKind.UpToDate(unheld, rb), "a binding without the reference")
	stale := rb.DeepCopy()
	stale.OwnerReferences[1].UID = "earlier-role-uid"
	assert.False(t, engine.RoleBindingKind.UpToDate(stale, rb), "a binding referring to an earlier role")
	assert.True(t, engine.RoleBindingKind.UpToDate(rb.DeepCopy(), rb))

	uncontrolled := unheld.DeepCopy()
	uncontrolled.OwnerReferences = uncontrolled.OwnerReferences[1:]
	merged2, update := engine.RoleBindingKind.Merge(uncontrolled, rb)
	require.True(t, update)
	assert.Equal(t, []metav1.OwnerReference{unheld.OwnerReferences[1], rb.OwnerReferences[0], rb.OwnerReferences[1]}, merged2.OwnerReferences)
	assert.True(t, engine.RoleBindingKind.UpToDate(merged2, rb))
}

// TestRewriteBeingDeleted: a role being deleted in the foreground is
// rewritten as it is: its finalizer stays; it is not released and made
// again. One that is not oria's is a conflict, left alone.
func TestRewriteBeingDeleted(t *testing.T) {
	ctx := context.Background()
	role := wholeRole(podRules)
	role.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	var c calls
	cl := fakeClient(t, &c, role)
	live := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, client.ObjectKeyFromObject(role), live))
	want := live.DeepCopy()
	want.Rules = nil
	kind := engine.WholeClusterRoleKind()
	managed := func(o client.Object) bool { return ownership.IsManaged(o) }
	s := engine.Summarize(engine.Rewrite(ctx, writer(t, cl, nil), kind, managed, []*rbacv1.ClusterRole{live}, []*rbacv1.ClusterRole{want}))
	require.Empty(t, s.Errors)
	assert.Equal(t, 1, s.Count[engine.Updated])
	got := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, client.ObjectKeyFromObject(role), got))
	assert.Equal(t, live.UID, got.UID, "the same role")
	assert.Equal(t, []string{metav1.FinalizerDeleteDependents}, got.Finalizers, "its finalizer stays")
	assert.Empty(t, got.Rules)
	assert.Zero(t, c.create.Load()+c.del.Load())

	s = engine.Summarize(engine.Rewrite(ctx, writer(t, cl, nil), kind, func(client.Object) bool { return false }, []*rbacv1.ClusterRole{got}, []*rbacv1.ClusterRole{live}))
	assert.Len(t, s.Conflicts, 1, "not oria's: left alone")
	assert.Nil(t, engine.Rewrite(ctx, writer(t, cl, nil), kind, managed, nil, nil), "nothing to rewrite costs nothing")
}
