package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

var t0 = time.Date(2025, 6, 6, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

// owns is a managedFields entry of manager owning the spec fields.
func owns(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":` + fields + `}`)}}
}

// TestRevokesOnly: what the guard takes for a revocation of a time-bound
// grant (admitted for everyone) and what for a grant (checked).
func TestRevokesOnly(t *testing.T) {
	admin := owns("admin", metav1.ManagedFieldsOperationApply, `{"f:scopeTemplateName":{},"f:namespaces":{},"f:notBefore":{},"f:expiresAt":{}}`)
	instance := func(notBefore, expiresAt *metav1.Time, managed ...metav1.ManagedFieldsEntry) *oriav1alpha1.ScopeInstance {
		return &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si", ManagedFields: managed},
			Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", Namespaces: []string{"a"}, NotBefore: notBefore, ExpiresAt: expiresAt}}
	}
	policy := func(notBefore, expiresAt *metav1.Time) *oriav1alpha1.RBACPolicy {
		return &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView, NotBefore: notBefore, ExpiresAt: expiresAt}}
	}
	hour, twoHours := at(time.Hour), at(2*time.Hour)
	for _, tc := range []struct {
		name     string
		old, obj client.Object
		want     bool
	}{
		{"expiresAt earlier", instance(nil, twoHours, admin), instance(nil, hour, admin), true},
		{"expiresAt added", instance(nil, nil, admin), instance(nil, hour, admin), true},
		{"notBefore later", instance(hour, nil, admin), instance(twoHours, nil, admin), true},
		{"notBefore added", instance(nil, twoHours, admin), instance(hour, twoHours, admin), true},
		{"expiresAt later: a grant", instance(nil, hour, admin), instance(nil, twoHours, admin), false},
		{"expiresAt removed: a grant", instance(nil, hour, admin), instance(nil, nil, admin), false},
		{"notBefore earlier: a grant", instance(twoHours, nil, admin), instance(hour, nil, admin), false},
		{"notBefore removed: a grant", instance(hour, nil, admin), instance(nil, nil, admin), false},
		{"the window moved later as a whole: a grant", instance(at(0), hour, admin), instance(hour, twoHours, admin), false},
		{"expiresAt earlier and a namespace more: checked as a whole", instance(nil, twoHours, admin),
			func() client.Object {
				o := instance(nil, hour, admin)
				o.Spec.Namespaces = []string{"a", "b"}
				return o
			}(), false},
		{"the delegated user patched expiresAt earlier: owns only it", instance(nil, twoHours, admin),
			instance(nil, hour, admin, owns("d", metav1.ManagedFieldsOperationUpdate, `{"f:expiresAt":{}}`)), true},
		{"the user co-owns the namespaces while shortening: checked", instance(nil, twoHours, admin),
			instance(nil, hour, admin, owns("d", metav1.ManagedFieldsOperationApply, `{"f:expiresAt":{},"f:namespaces":{}}`)), false},
		{"nothing changed in the window, but a co-owner of the namespaces: not a revocation", instance(nil, hour, admin),
			instance(nil, hour, admin, owns("d", metav1.ManagedFieldsOperationApply, `{"f:namespaces":{}}`)), false},
		{"policy: expiresAt earlier", policy(nil, twoHours), policy(nil, hour), true},
		{"policy: expiresAt removed", policy(nil, hour), policy(nil, nil), false},
		{"policy: expiresAt earlier, access raised: checked", policy(nil, twoHours),
			func() client.Object { o := policy(nil, hour); o.Spec.Access = oriav1alpha1.AccessAdmin; return o }(), false},
		{"a template has no window", &oriav1alpha1.ScopeTemplate{}, &oriav1alpha1.ScopeTemplate{}, false},
		// Windows compared as compiled, as instants (issue 40).
		{"policy: expiresAt a fraction later, the same whole second: nothing widens", policy(nil, hour), policy(nil, at(time.Hour+500*time.Millisecond)), true},
		{"policy: notBefore a fraction earlier, rounded up to the same second: nothing widens", policy(hour, nil), policy(at(time.Hour-500*time.Millisecond), nil), true},
		{"policy: the zero time (the year-1 patch) is not an earlier end", policy(nil, twoHours), policy(nil, &metav1.Time{}), false},
		{"instance: year 10000 is not a later start", instance(hour, nil, admin), instance(&metav1.Time{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, nil, admin), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RevokesOnly(tc.old, tc.obj); got != tc.want {
				t.Errorf("RevokesOnly = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClassifyWindow: a narrowed window needs no check, not even of spec
// errors (an expiry lands whatever else is wrong); a widened one is a
// grant and a spec change.
func TestClassifyWindow(t *testing.T) {
	si := func(expiresAt *metav1.Time) *oriav1alpha1.ScopeInstance {
		return &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si"},
			Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", ExpiresAt: expiresAt}}
	}
	type got struct{ Grants, Spec, Check bool }
	for _, tc := range []struct {
		name     string
		old, obj client.Object
		want     got
	}{
		{"narrowed", si(at(2 * time.Hour)), si(at(time.Hour)), got{false, false, false}},
		{"widened", si(at(time.Hour)), si(at(2 * time.Hour)), got{true, true, true}},
		{"removed", si(at(time.Hour)), si(nil), got{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := classify(tc.old, tc.obj)
			if d := cmp.Diff(tc.want, got{c.grants, c.spec, c.needsCheck()}); d != "" {
				t.Errorf("classify (-want +got):\n%s", d)
			}
		})
	}
}

func TestWidensWindow(t *testing.T) {
	si := func(expiresAt *metav1.Time) *oriav1alpha1.ScopeInstance {
		return &oriav1alpha1.ScopeInstance{Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", ExpiresAt: expiresAt}}
	}
	for _, tc := range []struct {
		name     string
		old, obj client.Object
		want     bool
	}{
		{"create", nil, si(at(time.Hour)), false},
		{"later", si(at(time.Hour)), si(at(2 * time.Hour)), true},
		{"earlier", si(at(2 * time.Hour)), si(at(time.Hour)), false},
		{"a template", &oriav1alpha1.ScopeTemplate{}, &oriav1alpha1.ScopeTemplate{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WidensWindow(tc.old, tc.obj); got != tc.want {
				t.Errorf("WidensWindow = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEmptyWindowIsASpecError: a window that never opens in whole seconds
// is refused for everyone, naming spec.expiresAt (the CRDs' rule refuses it
// first).
func TestEmptyWindowIsASpecError(t *testing.T) {
	ms := time.Millisecond
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si"},
		Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t", NotBefore: at(200 * ms), ExpiresAt: at(800 * ms)}}
	p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessView, NotBefore: at(900 * ms), ExpiresAt: at(1100 * ms)}}
	for _, obj := range []client.Object{si, p} {
		got := SpecErrors(obj)
		if len(got) != 1 || !strings.Contains(got[0], "spec.expiresAt must be at least one whole second after spec.notBefore") ||
			!strings.Contains(got[0], "refused for every user") {
			t.Errorf("%s: SpecErrors = %q", obj.GetName(), got)
		}
	}
	si.Spec.ExpiresAt = at(2 * time.Second)
	p.Spec.ExpiresAt = at(2 * time.Second)
	for _, obj := range []client.Object{si, p} {
		if got := SpecErrors(obj); len(got) != 0 {
			t.Errorf("%s: a window of a whole second: SpecErrors = %q", obj.GetName(), got)
		}
	}
}
