package watch

import (
	"testing"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestExtensionChanged(t *testing.T) {
	base := func() *ocv1.ClusterExtension {
		return &ocv1.ClusterExtension{ObjectMeta: metav1.ObjectMeta{
			Name: "ext", Generation: 1,
			Labels:      map[string]string{"team": "a"},
			Annotations: map[string]string{oriav1alpha1.AnnotationRBACMode: string(oriav1alpha1.RBACModeLegacy), "other": "1"},
		}}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(*ocv1.ClusterExtension)
		want   bool
	}{
		{"status only", func(ce *ocv1.ClusterExtension) {
			ce.Status.Conditions = []metav1.Condition{{Type: "Installed", Status: metav1.ConditionTrue}}
		}, false},
		{"another annotation changed", func(ce *ocv1.ClusterExtension) { ce.Annotations["other"] = "2" }, false},
		{"another annotation added", func(ce *ocv1.ClusterExtension) {
			ce.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
		}, false},
		{"mode changed", func(ce *ocv1.ClusterExtension) {
			ce.Annotations[oriav1alpha1.AnnotationRBACMode] = string(oriav1alpha1.RBACModeFineGrained)
		}, true},
		{"mode removed", func(ce *ocv1.ClusterExtension) { delete(ce.Annotations, oriav1alpha1.AnnotationRBACMode) }, true},
		{"mode set to the empty string", func(ce *ocv1.ClusterExtension) { ce.Annotations[oriav1alpha1.AnnotationRBACMode] = "" }, true},
		{"spec changed", func(ce *ocv1.ClusterExtension) { ce.Generation++ }, true},
		{"label changed", func(ce *ocv1.ClusterExtension) { ce.Labels["team"] = "b" }, true},
		{"being deleted", func(ce *ocv1.ClusterExtension) { ce.DeletionTimestamp = &now }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			tc.change(cur)
			if got := ExtensionChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("mode set where there was none", func(t *testing.T) {
		old, cur := base(), base()
		delete(old.Annotations, oriav1alpha1.AnnotationRBACMode)
		if !ExtensionChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}) {
			t.Error("Update = false for a new mode annotation")
		}
	})
}
