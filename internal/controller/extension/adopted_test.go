package extension

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

func TestHandOverPatch(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "rbac.authorization.k8s.io/v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	const (
		generated = `{"f:metadata":{"f:annotations":{"f:oria.operatorframework.io/crd":{}},"f:labels":{"f:oria.operatorframework.io/managed":{},"f:rbac.authorization.k8s.io/aggregate-to-view":{}}},"f:rules":{}}`
		aggOnly   = `{"f:metadata":{"f:labels":{"f:rbac.authorization.k8s.io/aggregate-to-view":{}}}}`
		helm      = `{"f:metadata":{"f:labels":{"f:olm.operatorframework.io/owner-name":{}}}}`
	)
	oriaLabels := map[string]string{
		oriav1alpha1.LabelManaged: "true", oriav1alpha1.LabelExtension: "argocd", oriav1alpha1.LabelRole: "view",
		oriav1alpha1.LabelAggregateToView: "true", oriav1alpha1.LabelOLMOwnerName: "argocd",
	}
	// role is a bundle role with labels and fields; generated adds the
	// annotation oria put on the role it generated.
	role := func(generated bool, labels map[string]string, fields ...metav1.ManagedFieldsEntry) BundleRole {
		annotations := map[string]string{oriav1alpha1.AnnotationHelmReleaseName: "argocd"}
		if generated {
			annotations[oriav1alpha1.AnnotationCRD] = "foos.example.com"
		}
		return BundleRole{Name: "foos.example.com-view", Kind: names.RoleView, OwnedLabels: appliedLabels(&metav1.ObjectMeta{ManagedFields: fields}),
			Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				Name: "foos.example.com-view", Labels: labels, ManagedFields: fields, Annotations: annotations,
			}}}
	}
	adopted := func(labels map[string]string, fields ...metav1.ManagedFieldsEntry) BundleRole {
		return role(true, labels, fields...)
	}
	removeOria := []map[string]any{
		{"op": "remove", "path": "/metadata/labels/oria.operatorframework.io~1managed"},
		{"op": "remove", "path": "/metadata/labels/oria.operatorframework.io~1extension"},
		{"op": "remove", "path": "/metadata/labels/oria.operatorframework.io~1role"},
		{"op": "remove", "path": "/metadata/annotations/oria.operatorframework.io~1crd"},
	}
	replace := func(entries ...metav1.ManagedFieldsEntry) map[string]any {
		return map[string]any{"op": "replace", "path": "/metadata/managedFields", "value": entries}
	}
	created := entry("oria", "Update", generated)
	helmAgg := `{"f:metadata":{"f:labels":{"f:olm.operatorframework.io/owner-name":{},"f:rbac.authorization.k8s.io/aggregate-to-view":{}}}}`
	removeAgg := map[string]any{"op": "remove", "path": "/metadata/labels/rbac.authorization.k8s.io~1aggregate-to-view"}
	tests := []struct {
		name string
		b    BundleRole
		keep string
		want []map[string]any
	}{
		{
			name: "adopted in Legacy mode: oria's labels and entries go, an Apply entry keeps the aggregation label",
			b:    adopted(oriaLabels, created, entry("oria", "Apply", generated), entry("helm", "Update", helm)),
			keep: oriav1alpha1.LabelAggregateToView,
			want: append(append([]map[string]any{}, removeOria...),
				replace(entry("helm", "Update", helm), entry("oria", "Apply", aggOnly))),
		},
		{
			name: "adopted in FineGrained mode: oria's entries go, and the aggregation label only oria held",
			b:    adopted(oriaLabels, created, entry("helm", "Update", helm)),
			want: append(append(append([]map[string]any{}, removeOria...), removeAgg), replace(entry("helm", "Update", helm))),
		},
		{
			name: "adopted in FineGrained mode, the bundle sets the aggregation label itself: it stays",
			b:    adopted(oriaLabels, created, entry("helm", "Update", helmAgg)),
			want: append(append([]map[string]any{}, removeOria...), replace(entry("helm", "Update", helmAgg))),
		},
		{
			name: "oria's entries were all there was: reset with one empty entry",
			b:    adopted(oriaLabels, created),
			want: append(append(append([]map[string]any{}, removeOria...), removeAgg), replace(metav1.ManagedFieldsEntry{})),
		},
		{
			name: "handed over already: nothing to do",
			b: role(false, map[string]string{oriav1alpha1.LabelAggregateToView: "true", oriav1alpha1.LabelOLMOwnerName: "argocd"},
				entry("oria", "Apply", aggOnly), entry("helm", "Update", helm)),
			keep: oriav1alpha1.LabelAggregateToView,
		},
		{
			name: "a bundle's role oria never generated: BundleRoleApply decides",
			b:    role(false, map[string]string{oriav1alpha1.LabelOLMOwnerName: "argocd"}, entry("helm", "Update", helm)),
			keep: oriav1alpha1.LabelAggregateToView,
		},
		{
			name: "an unreadable entry of oria's counts as generated",
			b:    role(false, map[string]string{oriav1alpha1.LabelOLMOwnerName: "argocd"}, entry("oria", "Update", `not json`)),
			keep: oriav1alpha1.LabelAggregateToView,
			want: []map[string]any{
				{"op": "add", "path": "/metadata/labels/rbac.authorization.k8s.io~1aggregate-to-view", "value": "true"},
				replace(entry("oria", "Apply", aggOnly)),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := handOverPatch(tc.b, tc.keep)
			if diff := cmp.Diff(jsonOf(t, tc.want), jsonOf(t, got)); diff != "" {
				t.Errorf("handOverPatch (-want +got):\n%s", diff)
			}
		})
	}
}

// jsonOf compares patches as the API server reads them.
func jsonOf(t *testing.T, ops []map[string]any) string {
	t.Helper()
	if ops == nil {
		return "null"
	}
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
