package extension

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

func TestBundleRoleApply(t *testing.T) {
	tests := []struct {
		kind names.RoleKind
		mode oriav1alpha1.RBACMode
		want map[string]string
	}{
		{names.RoleAdmin, oriav1alpha1.RBACModeLegacy, map[string]string{oriav1alpha1.LabelAggregateToAdmin: "true"}},
		{names.RoleEdit, oriav1alpha1.RBACModeLegacy, map[string]string{oriav1alpha1.LabelAggregateToEdit: "true"}},
		{names.RoleView, oriav1alpha1.RBACModeLegacy, map[string]string{oriav1alpha1.LabelAggregateToView: "true"}},
		{names.RoleViewCRDView, oriav1alpha1.RBACModeLegacy, map[string]string{oriav1alpha1.LabelAggregateToView: "true"}},
		{names.RoleAdmin, oriav1alpha1.RBACModeFineGrained, nil},
		{names.RoleView, oriav1alpha1.RBACModeUnmanaged, nil},
	}
	for _, tc := range tests {
		// A role oria applied a label to before (so that releasing it is a
		// write in every mode but Legacy).
		b := BundleRole{Name: "foos.example.com-" + string(tc.kind), Kind: tc.kind, OwnedLabels: []string{"x"}}
		ac := BundleRoleApply(b, tc.mode)
		if diff := cmp.Diff(tc.want, ac.Labels); diff != "" {
			t.Errorf("%s/%s labels (-want +got):\n%s", tc.kind, tc.mode, diff)
		}
		// Nothing but the name and that label: no rules, owner, annotations.
		raw, _ := json.Marshal(ac)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		meta := m["metadata"].(map[string]any)
		delete(meta, "name")
		delete(meta, "labels")
		delete(m, "metadata")
		delete(m, "apiVersion")
		delete(m, "kind")
		if len(m) != 0 || len(meta) != 0 {
			t.Errorf("%s/%s: apply configuration carries more than the label: %s", tc.kind, tc.mode, raw)
		}
	}
}

// TestBundleRoleApplyTooBroad: a bundle role that reaches beyond the extension
// gets no aggregation label in Legacy mode, and loses the one oria added.
func TestBundleRoleApplyTooBroad(t *testing.T) {
	agg := oriav1alpha1.LabelAggregateToView
	tests := []struct {
		name  string
		b     BundleRole
		want  bool // an apply is sent
		label bool // ...and carries the aggregation label
	}{
		{"within, not labelled yet", BundleRole{Kind: names.RoleView}, true, true},
		{"too broad, never labelled", BundleRole{Kind: names.RoleView, TooBroad: "x"}, false, false},
		{"too broad, labelled by oria earlier", BundleRole{Kind: names.RoleView, TooBroad: "x",
			Labels: map[string]string{agg: "true"}, OwnedLabels: []string{agg}}, true, false},
		{"too broad, labelled by the bundle itself: not oria's to remove", BundleRole{Kind: names.RoleView, TooBroad: "x",
			Labels: map[string]string{agg: "true"}}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.b.Name = "foos.example.com-view"
			ac := BundleRoleApply(tc.b, oriav1alpha1.RBACModeLegacy)
			if (ac != nil) != tc.want {
				t.Fatalf("apply sent = %v, want %v", ac != nil, tc.want)
			}
			if ac != nil && (ac.Labels[agg] == "true") != tc.label {
				t.Errorf("apply labels %v, want the aggregation label: %v", ac.Labels, tc.label)
			}
		})
	}
}

func TestBundleRoleUpToDate(t *testing.T) {
	fields := func(labels ...string) []metav1.ManagedFieldsEntry {
		m := map[string]any{}
		for _, l := range labels {
			m["f:"+l] = map[string]any{}
		}
		raw, _ := json.Marshal(map[string]any{"f:metadata": map[string]any{"f:labels": m}})
		return []metav1.ManagedFieldsEntry{{Manager: "oria", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}}}
	}
	agg := oriav1alpha1.LabelAggregateToView
	tests := []struct {
		name   string
		labels map[string]string
		mf     []metav1.ManagedFieldsEntry
		mode   oriav1alpha1.RBACMode
		want   bool
	}{
		{"legacy, label absent", nil, nil, oriav1alpha1.RBACModeLegacy, false},
		{"legacy, label set by the bundle, not oria's", map[string]string{agg: "true"}, nil, oriav1alpha1.RBACModeLegacy, false},
		{"legacy, oria's label", map[string]string{agg: "true"}, fields(agg), oriav1alpha1.RBACModeLegacy, true},
		{"legacy, oria's label with another value", map[string]string{agg: "false"}, fields(agg), oriav1alpha1.RBACModeLegacy, false},
		{"legacy, oria owns a label it should not", map[string]string{agg: "true", "x": "y"}, fields(agg, "x"), oriav1alpha1.RBACModeLegacy, false},
		{"fine-grained, oria owns the label", map[string]string{agg: "true"}, fields(agg), oriav1alpha1.RBACModeFineGrained, false},
		{"fine-grained, bundle's own label", map[string]string{agg: "true"}, nil, oriav1alpha1.RBACModeFineGrained, true},
		{"unmanaged, nothing of oria's", nil, fields(), oriav1alpha1.RBACModeUnmanaged, true},
		{"other managers ignored", map[string]string{agg: "true"}, func() []metav1.ManagedFieldsEntry {
			f := fields(agg)
			f[0].Manager = "operator-controller"
			return f
		}(), oriav1alpha1.RBACModeUnmanaged, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "foos.example.com-view-crdview", Labels: tc.labels, ManagedFields: tc.mf}}
			b := BundleRoles([]metav1.PartialObjectMetadata{cr}, []string{"foos.example.com"})["foos.example.com-view-crdview"]
			if got := BundleRoleApply(b, tc.mode) == nil; got != tc.want {
				t.Errorf("up to date = %v, want %v", got, tc.want)
			}
		})
	}
}
