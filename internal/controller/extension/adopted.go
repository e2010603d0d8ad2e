package extension

import (
	"encoding/json"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
)

// A role oria generated can become the bundle's: its name is one the
// extension's bundle ships from some version on (or ships at an install
// where oria, with the mode set at creation, saw the CRDs first). oria's
// roles carry Helm's adoption metadata (olm.AdoptionLabels), so Helm adopts
// the role in place instead of refusing the release: it adds
// operator-controller's owner labels and the bundle's rules, and keeps
// every other label, oria's aggregation label included (Helm's three-way
// patch of an adopted object deletes nothing: it diffs the bundle's
// manifest against itself). Access never lapses.
//
// From then on the role is the bundle's (ownership.IsBundleRole) and oria
// hands it over: handOverPatch removes oria's labels and annotation, and
// narrows oria's server-side apply entry to the one label oria keeps
// deciding on (the Legacy aggregation label), so that nothing oria's entry
// held alone (the rules, when the bundle's equal oria's) is removed by
// oria's next apply.

// handOverPatch returns the JSON patch operations (see engine.HandOver) that
// hand the bundle role b over to its bundle, or nil when oria never
// generated it (oria's labels and annotation are gone, and oria's field
// manager holds at most aggregation labels: BundleRoleApply decides those).
// keep is the aggregation label oria keeps deciding on ("" for none).
//
// oria's entries in managedFields go: the one of its create (operation
// Update) and the one of its repairs (Apply). With keep, an Apply entry
// holding exactly that label takes their place, and the label is set;
// without, the aggregation label goes if only oria held it (a label the
// bundle sets itself stays).
func handOverPatch(b BundleRole, keep string) []map[string]any {
	if b.Object == nil {
		return nil
	}
	obj := b.Object
	var others, orias []metav1.ManagedFieldsEntry
	for _, e := range obj.ManagedFields {
		if e.Manager == oriav1alpha1.FieldOwner && e.Subresource == "" {
			orias = append(orias, e)
		} else {
			others = append(others, e)
		}
	}
	labelKeys, annotationKeys := ownership.ReleasedByExtensionRole()
	var ops []map[string]any
	remove := func(field string, have map[string]string, keys ...string) {
		for _, k := range keys {
			if _, ok := have[k]; ok {
				ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/" + field + "/" + escapePointer(k)})
			}
		}
	}
	remove("labels", obj.Labels, labelKeys...)
	remove("annotations", obj.Annotations, annotationKeys...)
	if len(ops) == 0 && !slices.ContainsFunc(orias, holdsMoreThanAggregation) {
		return nil
	}
	agg := aggregationLabel[b.Kind]
	entries := others
	switch {
	case keep != "":
		raw, _ := json.Marshal(map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:" + keep: map[string]any{}}}})
		entries = append(entries, metav1.ManagedFieldsEntry{
			Manager: oriav1alpha1.FieldOwner, Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: rbacv1.SchemeGroupVersion.String(), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw},
		})
		if obj.Labels[keep] != "true" {
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + escapePointer(keep), "value": "true"})
		}
	case slices.ContainsFunc(orias, holding(agg)) && !slices.ContainsFunc(others, holding(agg)):
		remove("labels", obj.Labels, agg)
	}
	if len(entries) == 0 {
		// An empty list would leave managedFields as they are; one empty
		// entry resets them.
		entries = []metav1.ManagedFieldsEntry{{}}
	}
	return append(ops, map[string]any{"op": "replace", "path": "/metadata/managedFields", "value": entries})
}

// labelsHeld returns the label keys the managedFields entry e holds, and
// whether it holds any other field. An entry that cannot be read holds
// something else.
func labelsHeld(e metav1.ManagedFieldsEntry) (labels []string, other bool) {
	if e.FieldsV1 == nil {
		return nil, false
	}
	var fields map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
		return nil, true
	}
	for top, inner := range fields {
		if top != "f:metadata" {
			other = true
			continue
		}
		for k, v := range inner {
			if k != "f:labels" {
				other = true
				continue
			}
			for label := range v {
				if key, ok := strings.CutPrefix(label, "f:"); ok {
					labels = append(labels, key)
				}
			}
		}
	}
	return labels, other
}

// holdsMoreThanAggregation reports whether the entry e holds a field other
// than the aggregation labels.
func holdsMoreThanAggregation(e metav1.ManagedFieldsEntry) bool {
	labels, other := labelsHeld(e)
	return other || slices.ContainsFunc(labels, func(l string) bool { return !slices.Contains(exclusiveLabels, l) })
}

// holding returns whether an entry holds the label key.
func holding(key string) func(metav1.ManagedFieldsEntry) bool {
	return func(e metav1.ManagedFieldsEntry) bool {
		labels, _ := labelsHeld(e)
		return slices.Contains(labels, key)
	}
}

// escapePointer escapes a map key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
