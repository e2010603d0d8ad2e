package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

var podRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}

func template(name string, roles []oriav1alpha1.ClusterRoleTemplate) *oriav1alpha1.ScopeTemplate {
	return &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "tuid"},
		Spec:       oriav1alpha1.ScopeTemplateSpec{ClusterRoles: roles},
	}
}

func instance(name string) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "iuid"}}
}

func sa(name, ns string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
}

func TestUpToDateAndOwnership(t *testing.T) {
	inst := instance("inst")
	want := binding.RoleBindings(inst, "tmpl", []string{"view"}, []rbacv1.Subject{sa("bot", "")}, []string{"ns"})[0]

	cur := want.DeepCopy()
	cur.Labels["extra"] = "someone else's label"
	cur.Subjects[0].APIGroup = "" // what the API server returns for a ServiceAccount
	assert.True(t, engine.RoleBindingKind.UpToDate(cur, want), "extra labels are not drift")

	edited := want.DeepCopy()
	edited.Subjects = append(edited.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "mallory", APIGroup: rbacv1.GroupName})
	assert.False(t, engine.RoleBindingKind.UpToDate(edited, want), "an added subject is drift")

	moved := want.DeepCopy()
	moved.Subjects[0].Namespace = "elsewhere"
	assert.False(t, engine.RoleBindingKind.UpToDate(moved, want), "a subject's namespace is compared")
	none, emptied := want.DeepCopy(), want.DeepCopy()
	none.Subjects, emptied.Subjects = nil, []rbacv1.Subject{}
	assert.True(t, engine.RoleBindingKind.UpToDate(emptied, none), "no subjects: nil and empty are the same")
	assert.False(t, engine.RoleBindingKind.UpToDate(none, want), "a removed subject is drift")

	relabelled := want.DeepCopy()
	relabelled.Labels[oriav1alpha1.LabelScopeTemplate] = "other"
	assert.False(t, engine.RoleBindingKind.UpToDate(relabelled, want))

	staleOwner := want.DeepCopy()
	staleOwner.OwnerReferences[0].UID = "old"
	assert.False(t, engine.RoleBindingKind.UpToDate(staleOwner, want), "a stale owner is repaired")
	assert.True(t, ownership.InstanceOwner("inst")(staleOwner))

	// Ownership: labels or controller reference; anything else is foreign.
	noLabels := want.DeepCopy()
	noLabels.Labels = nil
	assert.True(t, ownership.InstanceOwner("inst")(noLabels), "our ownerReference")
	noOwner := want.DeepCopy()
	noOwner.OwnerReferences = nil
	assert.True(t, ownership.InstanceOwner("inst")(noOwner), "our labels")
	foreign := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: "ns"}}
	assert.False(t, ownership.InstanceOwner("inst")(foreign))
	assert.False(t, ownership.InstanceOwner("other-instance")(want))

	// Merge keeps other owners but replaces the controller.
	staleOwner.OwnerReferences = append(staleOwner.OwnerReferences, metav1.OwnerReference{Kind: "Thing", Name: "t", UID: "x"})
	merged, update := engine.RoleBindingKind.Merge(staleOwner, want)
	require.True(t, update)
	assert.Len(t, merged.OwnerReferences, 2)
	assert.True(t, engine.RoleBindingKind.UpToDate(merged, want))

	role := binding.ClusterRoles(template("tmpl", []oriav1alpha1.ClusterRoleTemplate{{Name: "r", Rules: podRules}}))[0]
	curRole := role.DeepCopy()
	curRole.Rules[0].ResourceNames = []string{} // empty and nil are the same
	assert.True(t, engine.ClusterRoleKind().UpToDate(curRole, role))
	curRole.Rules = append(curRole.Rules, rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}})
	assert.False(t, engine.ClusterRoleKind().UpToDate(curRole, role))
	// An aggregationRule someone added goes, with an update (apply
	// cannot remove a field another manager set).
	aggregated := role.DeepCopy()
	aggregated.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"x": "y"}}}}
	assert.False(t, engine.ClusterRoleKind().UpToDate(aggregated, role))
	merged2, update := engine.ClusterRoleKind().Merge(aggregated, role)
	require.True(t, update)
	assert.Nil(t, merged2.AggregationRule)
	assert.True(t, engine.ClusterRoleKind().UpToDate(merged2, role))
	assert.True(t, ownership.TemplateOwns(curRole, "tmpl"))
	assert.False(t, ownership.TemplateOwns(curRole, "other"))
}

func TestApplyConfiguration(t *testing.T) {
	inst := instance("inst")
	rb := binding.RoleBindings(inst, "tmpl", []string{"view"}, []rbacv1.Subject{sa("bot", ""), {Kind: rbacv1.UserKind, Name: "alice"}}, []string{"ns"})[0]
	ac, err := engine.ApplyConfiguration(rb)
	require.NoError(t, err)
	b, err := json.Marshal(ac)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	want := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "RoleBinding",
		"metadata": map[string]any{
			"name":      rb.Name,
			"namespace": "ns",
			"labels":    map[string]any{"app.kubernetes.io/managed-by": "oria", "oria.operatorframework.io/managed": "true", "oria.operatorframework.io/scope-instance": "inst", "oria.operatorframework.io/scope-template": "tmpl"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "oria.operatorframework.io/v1alpha1", "kind": "ScopeInstance", "name": "inst", "uid": "iuid",
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
		"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
		"subjects": []any{
			map[string]any{"kind": "ServiceAccount", "name": "bot", "namespace": "ns"},
			map[string]any{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("apply configuration (-want +got):\n%s", diff)
	}

	_, err = engine.ApplyConfiguration(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "no-type-meta"}})
	assert.Error(t, err, "an object without apiVersion/kind cannot be applied")
}
