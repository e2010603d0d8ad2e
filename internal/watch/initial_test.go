package watch

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestSkipInitialList(t *testing.T) {
	p := SkipInitialList[client.Object]()
	obj := &rbacv1.ClusterRole{}
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"create of the initial list", p.Create(event.CreateEvent{Object: obj, IsInInitialList: true}), false},
		{"create", p.Create(event.CreateEvent{Object: obj}), true},
		{"update", p.Update(event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}), true},
		{"delete", p.Delete(event.DeleteEvent{Object: obj}), true},
		{"generic", p.Generic(event.GenericEvent{Object: obj}), true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: passed %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
