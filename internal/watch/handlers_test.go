package watch

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestEnqueueController(t *testing.T) {
	ref := func(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u", Controller: ptr.To(controller)}
	}
	oria := oriav1alpha1.GroupVersion.String()
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		want []string
	}{
		{"controlled by an instance", []metav1.OwnerReference{ref(oria, "ScopeInstance", "inst", true)}, []string{"inst"}},
		{"owner but not controller", []metav1.OwnerReference{ref(oria, "ScopeInstance", "inst", false)}, nil},
		{"controller of another kind", []metav1.OwnerReference{ref(oria, "ScopeTemplate", "tmpl", true)}, nil},
		{"same kind in another group", []metav1.OwnerReference{ref("example.com/v1", "ScopeInstance", "inst", true)}, nil},
		{"no owner", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb", Namespace: "ns", OwnerReferences: tc.refs}}
			obs := &observer{}
			h := EnqueueController(oriav1alpha1.GroupVersion.Group, "ScopeInstance", obs)
			h.Create(context.Background(), event.CreateEvent{Object: rb}, q)
			if len(obs.seen) != 1 || obs.seen[0] != "rb" || len(obs.gone) != 0 {
				t.Errorf("after a create: seen %v, gone %v; want the created object seen", obs.seen, obs.gone)
			}
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: rb, ObjectNew: rb}, q)
			h.Delete(context.Background(), event.DeleteEvent{Object: rb}, q)
			if len(obs.seen) != 1 || len(obs.gone) != 1 || obs.gone[0] != "rb" {
				t.Errorf("after an update and a delete: seen %v, gone %v; want the deleted object gone", obs.seen, obs.gone)
			}
			// Without an observer the handler only enqueues.
			EnqueueController(oriav1alpha1.GroupVersion.Group, "ScopeInstance", nil).Delete(context.Background(), event.DeleteEvent{Object: rb}, q)
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				if req.Namespace != "" {
					t.Errorf("request %v has a namespace; owners are cluster-scoped", req)
				}
				got = append(got, req.Name)
				q.Done(req)
			}
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Errorf("enqueued %v, want %v", got, tc.want)
			}
		})
	}
}

// observer records what EnqueueController tells an Observer.
type observer struct{ seen, gone []string }

func (o *observer) Seen(obj client.Object) { o.seen = append(o.seen, obj.GetName()) }
func (o *observer) Gone(obj client.Object) { o.gone = append(o.gone, obj.GetName()) }
