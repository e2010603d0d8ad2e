package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

func TestGateRoleKind(t *testing.T) {
	kind := engine.GateRoleKind()
	sources := []binding.GateSource{{Name: "pod-reader", Rules: podRules}}
	filled := binding.GateRole(instance("inst"), sources, true)
	empty := binding.GateRole(instance("inst"), sources, false)

	for _, tc := range []struct {
		name     string
		cur      func() *rbacv1.ClusterRole
		want     *rbacv1.ClusterRole
		upToDate bool
	}{
		{"filled as desired", filled.DeepCopy, filled, true},
		{"empty as desired (its seal alone)", empty.DeepCopy, empty, true},
		{"empty without its seal (made by an earlier oria)", func() *rbacv1.ClusterRole {
			c := empty.DeepCopy()
			c.Rules = nil
			return c
		}, empty, false},
		{"to be emptied", filled.DeepCopy, empty, false},
		{"to be filled", empty.DeepCopy, filled, false},
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
			require.True(t, update, "every change of a gate is an update of the whole role")
			assert.True(t, kind.UpToDate(merged, tc.want), "the update makes the gate exactly as desired")
			assert.Equal(t, tc.want.Labels, merged.Labels)
			assert.Equal(t, tc.want.Annotations[oriav1alpha1.AnnotationGateRoles], merged.Annotations[oriav1alpha1.AnnotationGateRoles])
		})
	}
}

// TestGateHeld: a gate made by an earlier oria, without its
// foregroundDeletion finalizer, is not up to date and gains it by the
// update; a gate being deleted never gains a finalizer (the API server
// refuses it). A binding of the gate without its hold on the gate, or with
// a hold on an earlier gate's UID, is not up to date, and the merge gives
// it the hold, its controller reference first, other references kept.
func TestGateHeld(t *testing.T) {
	kind := engine.GateRoleKind()
	want := binding.GateRole(instance("inst"), nil, false)
	old := want.DeepCopy()
	old.Finalizers = nil
	assert.False(t, kind.UpToDate(old, want), "a gate without its finalizer")
	merged, _ := kind.Merge(old, want)
	assert.Equal(t, []string{metav1.FinalizerDeleteDependents}, merged.Finalizers)
	assert.True(t, kind.UpToDate(merged, want))
	deleting := old.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	merged, _ = kind.Merge(deleting, want)
	assert.Empty(t, merged.Finalizers, "no finalizer is added to a gate being deleted")

	inst := instance("inst")
	rb := binding.RoleBindings(inst, "tmpl", []string{want.Name}, []rbacv1.Subject{sa("bot", "ns")}, []string{"ns"})[0]
	unheld := rb.DeepCopy()
	unheld.OwnerReferences = append(unheld.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other-uid"})
	binding.HoldGate([]*rbacv1.RoleBinding{rb}, binding.GateHold(want.Name, "gate-uid"))
	assert.False(t, engine.RoleBindingKind.UpToDate(unheld, rb), "a binding that does not hold its gate")
	stale := rb.DeepCopy()
	stale.OwnerReferences[1].UID = "earlier-gate-uid"
	assert.False(t, engine.RoleBindingKind.UpToDate(stale, rb), "a binding holding an earlier gate")
	assert.True(t, engine.RoleBindingKind.UpToDate(rb.DeepCopy(), rb))

	uncontrolled := unheld.DeepCopy()
	uncontrolled.OwnerReferences = uncontrolled.OwnerReferences[1:]
	merged2, update := engine.RoleBindingKind.Merge(uncontrolled, rb)
	require.True(t, update)
	assert.Equal(t, []metav1.OwnerReference{unheld.OwnerReferences[1], rb.OwnerReferences[0], rb.OwnerReferences[1]}, merged2.OwnerReferences)
	assert.True(t, engine.RoleBindingKind.UpToDate(merged2, rb))
}

// TestEmptyGatesBeingDeleted: a gate the garbage collector deletes in the
// foreground (its instance gone) is emptied as it is: its finalizer stays,
// so its name stays held until its bindings are gone; it is not released
// and made again.
func TestEmptyGatesBeingDeleted(t *testing.T) {
	ctx := context.Background()
	gate := binding.GateRole(instance("inst"), []binding.GateSource{{Name: "pod-reader", Rules: podRules}}, true)
	gate.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	var c calls
	cl := fakeClient(t, &c, gate)
	live := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, client.ObjectKeyFromObject(gate), live))
	s := engine.Summarize(engine.EmptyGates(ctx, writer(t, cl, nil), []*rbacv1.ClusterRole{live}))
	require.Empty(t, s.Errors)
	assert.Equal(t, 1, s.Count[engine.Updated])
	got := &rbacv1.ClusterRole{}
	require.NoError(t, cl.Get(ctx, client.ObjectKeyFromObject(gate), got))
	assert.Equal(t, live.UID, got.UID, "the same gate")
	assert.Equal(t, []string{metav1.FinalizerDeleteDependents}, got.Finalizers, "its name stays held")
	assert.False(t, ownership.GateGrants(got), "emptied: %v", got.Rules)
	assert.Zero(t, c.create.Load()+c.del.Load())
}
