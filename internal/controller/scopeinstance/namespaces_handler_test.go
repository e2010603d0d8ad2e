package scopeinstance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/metrics"
	"github.com/operator-framework/oria/internal/reconciler"
	"github.com/operator-framework/oria/internal/scheme"
)

// builderIndexer registers lookup.SetupIndexes' indexes on a fake client.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

func instance(name string, mutate func(*oriav1alpha1.ScopeInstanceSpec)) *oriav1alpha1.ScopeInstance {
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: oriav1alpha1.ScopeInstanceSpec{ScopeTemplateName: "t"}}
	mutate(&si.Spec)
	return si
}

func team(v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"team": v}}
}

func nsObject(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// The namespace handler skips the creates of the initial list (each
// instance's own add enqueues it) and maps every other event, through the
// cache's indexes, to the instances that list the namespace, select it by
// its new or old labels, or publish into it; the binding-latency clock
// starts only for a new or relabelled namespace's instances that should
// bind it now.
func TestNamespaceHandler(t *testing.T) {
	s, err := scheme.New()
	require.NoError(t, err)
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(
		instance("listed", func(s *oriav1alpha1.ScopeInstanceSpec) { s.Namespaces = []string{"ns", "other"} }),
		instance("listed-elsewhere", func(s *oriav1alpha1.ScopeInstanceSpec) { s.Namespaces = []string{"other"} }),
		instance("team-a", func(s *oriav1alpha1.ScopeInstanceSpec) { s.NamespaceSelector = team("a") }),
		instance("team-b", func(s *oriav1alpha1.ScopeInstanceSpec) { s.NamespaceSelector = team("b") }),
		instance("publisher", func(s *oriav1alpha1.ScopeInstanceSpec) {
			s.NamespaceSelector = team("c")
			s.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: "ns", Name: "cm"}}
		}),
		instance("cluster-wide", func(*oriav1alpha1.ScopeInstanceSpec) {}),
	)
	require.NoError(t, lookup.SetupIndexes(context.Background(), builderIndexer{b}))
	c := b.Build()

	a, bLabels := map[string]string{"team": "a"}, map[string]string{"team": "b"}
	deleting := nsObject("ns", a)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name           string
		send           func(context.Context, *namespaceHandler, workqueue.TypedRateLimitingInterface[reconcile.Request])
		queued, clocks []string
	}{{
		name: "create of the initial list",
		send: func(ctx context.Context, h *namespaceHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: nsObject("ns", a), IsInInitialList: true}, q)
		},
	}, {
		name: "create",
		send: func(ctx context.Context, h *namespaceHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: nsObject("ns", a)}, q)
		},
		queued: []string{"listed", "publisher", "team-a"},
		clocks: []string{"listed", "team-a"},
	}, {
		name: "relabelled from team b to team a",
		send: func(ctx context.Context, h *namespaceHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: nsObject("ns", bLabels), ObjectNew: nsObject("ns", a)}, q)
		},
		queued: []string{"listed", "publisher", "team-a", "team-b"},
		clocks: []string{"listed", "team-a"},
	}, {
		name: "update that changes nothing oria reads",
		send: func(ctx context.Context, h *namespaceHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: nsObject("ns", a), ObjectNew: nsObject("ns", a)}, q)
		},
	}, {
		name: "terminating",
		send: func(ctx context.Context, h *namespaceHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: nsObject("ns", a), ObjectNew: deleting}, q)
		},
		queued: []string{"listed", "publisher", "team-a"},
	}, {
		name: "delete",
		send: func(ctx context.Context, h *namespaceHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, event.DeleteEvent{Object: nsObject("ns", bLabels)}, q)
		},
		queued: []string{"listed", "publisher", "team-b"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReconciler(Deps{Base: reconciler.Base{Client: c}}, Options{})
			observed := 0
			r.latency = metrics.NewNamespaceLatency(func(float64) { observed++ })
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.send(context.Background(), &namespaceHandler{r: r}, q)

			var queued []string
			for q.Len() > 0 {
				req, _ := q.Get()
				queued = append(queued, req.Name)
				q.Done(req)
			}
			slices.Sort(queued)
			if d := cmp.Diff(tc.queued, queued); d != "" {
				t.Errorf("queued (-want +got):\n%s", d)
			}
			// A started clock shows as an observed latency once its
			// instance creates the namespace's binding.
			var clocks []string
			for _, name := range []string{"cluster-wide", "listed", "listed-elsewhere", "publisher", "team-a", "team-b"} {
				before := observed
				r.latency.Bound(name, []engine.Outcome{{Namespace: "ns", Action: engine.Created}}, time.Now())
				if observed > before {
					clocks = append(clocks, name)
				}
			}
			if d := cmp.Diff(tc.clocks, clocks); d != "" {
				t.Errorf("clocks started (-want +got):\n%s", d)
			}
		})
	}
}

func TestSelecting(t *testing.T) {
	invalid := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}
	items := []oriav1alpha1.ScopeInstance{
		*instance("listed", func(s *oriav1alpha1.ScopeInstanceSpec) { s.Namespaces = []string{"ns"} }),
		*instance("invalid", func(s *oriav1alpha1.ScopeInstanceSpec) { s.NamespaceSelector = invalid }),
		*instance("team-a", func(s *oriav1alpha1.ScopeInstanceSpec) { s.NamespaceSelector = team("a") }),
		*instance("team-b", func(s *oriav1alpha1.ScopeInstanceSpec) { s.NamespaceSelector = team("b") }),
		*instance("everything", func(s *oriav1alpha1.ScopeInstanceSpec) { s.NamespaceSelector = &metav1.LabelSelector{} }),
	}
	for _, tc := range []struct {
		name        string
		labels, old map[string]string
		now, before []string
	}{
		{name: "no old labels", labels: map[string]string{"team": "a"}, now: []string{"team-a", "everything"}},
		{name: "relabelled", labels: map[string]string{"team": "a"}, old: map[string]string{"team": "b"},
			now: []string{"team-a", "everything"}, before: []string{"team-b"}},
		{name: "the same labels", labels: map[string]string{"team": "b"}, old: map[string]string{"team": "b"},
			now: []string{"team-b", "everything"}},
		{name: "unlabelled", labels: nil, old: map[string]string{"team": "a"}, now: []string{"everything"}, before: []string{"team-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, before := selecting(items, tc.labels, tc.old)
			if d := cmp.Diff(tc.now, now); d != "" {
				t.Errorf("now (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.before, before); d != "" {
				t.Errorf("before (-want +got):\n%s", d)
			}
		})
	}
}
