package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
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
