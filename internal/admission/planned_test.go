package admission

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// TestPlannedTemplate: the template a dry run carries is read on a dry run
// only, and only when it is the template the instance names.
func TestPlannedTemplate(t *testing.T) {
	tmpl := &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	raw, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	si := func(template, annotation string) *oriav1alpha1.ScopeInstance {
		o := &oriav1alpha1.ScopeInstance{Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: template}}
		if annotation != "" {
			o.Annotations = map[string]string{oriav1alpha1.AnnotationPlannedTemplate: annotation}
		}
		return o
	}
	for _, tc := range []struct {
		name    string
		dryRun  bool
		si      *oriav1alpha1.ScopeInstance
		want    bool
		wantErr bool
	}{
		{"dry run, its template", true, si("t", string(raw)), true, false},
		{"a real write: ignored", false, si("t", string(raw)), false, false},
		{"another template: ignored", true, si("u", string(raw)), false, false},
		{"no annotation", true, si("t", ""), false, false},
		{"not a template: refused", true, si("t", "{"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := plannedTemplate(tc.dryRun, tc.si)
			if (err != nil) != tc.wantErr || (got != nil) != tc.want {
				t.Errorf("plannedTemplate = %v, %v; want a template %v, an error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
