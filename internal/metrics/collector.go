package metrics

import (
	"context"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// ReasonNotReported is the reason label of an object that has no Ready
// (RBACManaged) condition yet.
const ReasonNotReported = "NotReported"

// collectTimeout bounds the cache reads of one scrape.
const collectTimeout = 5 * time.Second

// oriaKinds are the kinds oria reconciles and reports Ready on.
var oriaKinds = []string{"RBACPolicy", "ScopeTemplate", "ScopeInstance"}

// rbacKinds are the kinds oria writes; its cache holds only its own.
var rbacKinds = []struct {
	kind string
	obj  client.Object
	list func() client.ObjectList
}{
	{"ClusterRole", &rbacv1.ClusterRole{}, func() client.ObjectList { return &rbacv1.ClusterRoleList{} }},
	{"ClusterRoleBinding", &rbacv1.ClusterRoleBinding{}, func() client.ObjectList { return &rbacv1.ClusterRoleBindingList{} }},
	{"RoleBinding", &rbacv1.RoleBinding{}, func() client.ObjectList { return &rbacv1.RoleBindingList{} }},
}

// Collector reports the object gauges at scrape time from a reader, the
// manager's cache: a scrape costs no API request.
type Collector struct {
	r         client.Reader
	managed   *prometheus.Desc
	byReason  *prometheus.Desc
	conflicts *prometheus.Desc
}

// NewCollector returns a Collector reading from r.
func NewCollector(r client.Reader) *Collector {
	return &Collector{
		r: r,
		managed: prometheus.NewDesc(ManagedObjects,
			"Objects oria reconciles (RBACPolicy, ScopeTemplate, ScopeInstance) or created (ClusterRole, ClusterRoleBinding, RoleBinding), by kind.",
			[]string{"kind"}, nil),
		byReason: prometheus.NewDesc(ObjectsByReadyReason,
			"oria's objects by kind and Ready condition status and reason; ClusterExtensions by oria's RBACManaged condition.",
			[]string{"kind", "status", "reason"}, nil),
		conflicts: prometheus.NewDesc(Conflicts,
			"Objects of each oria kind (and ClusterExtensions) whose condition reason is Conflict: a name oria would use is held by an object oria did not create.",
			[]string{"kind"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.managed
	ch <- c.byReason
	ch <- c.conflicts
}

// Collect implements prometheus.Collector. A kind that cannot be listed is
// left out of the scrape (and logged) rather than failing the whole
// endpoint.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	s, errs := Snapshot(ctx, c.r)
	for _, err := range errs {
		ctrl.Log.WithName("metrics").Error(err, "collecting oria's object metrics")
	}
	for kind, n := range s.Managed {
		ch <- prometheus.MustNewConstMetric(c.managed, prometheus.GaugeValue, float64(n), kind)
	}
	for k, n := range s.ByReason {
		ch <- prometheus.MustNewConstMetric(c.byReason, prometheus.GaugeValue, float64(n), k.Kind, k.Status, k.Reason)
	}
	for kind, n := range s.Conflicts {
		ch <- prometheus.MustNewConstMetric(c.conflicts, prometheus.GaugeValue, float64(n), kind)
	}
}

// ReasonKey labels one series of oria_objects_by_ready_reason.
type ReasonKey struct {
	Kind, Status, Reason string
}

// State is what the object gauges report.
type State struct {
	Managed   map[string]int
	ByReason  map[ReasonKey]int
	Conflicts map[string]int
}

// Snapshot counts oria's objects in r. Kinds that could not be listed are
// missing from the result and their errors returned; a kind the API server
// does not serve is missing without an error.
func Snapshot(ctx context.Context, r client.Reader) (State, []error) {
	s := State{Managed: map[string]int{}, ByReason: map[ReasonKey]int{}, Conflicts: map[string]int{}}
	var errs []error
	count := func(kind string, list client.ObjectList, conditions func() [][]metav1.Condition, condType string, managed bool, opts ...client.ListOption) {
		if err := r.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); meta.IsNoMatchError(err) {
			// A kind the API server does not serve: OLM v1's
			// ClusterExtension before OLM is installed (reported by
			// oria_olm_api_available), not an error at every scrape.
			return
		} else if err != nil {
			errs = append(errs, err)
			return
		}
		if managed {
			s.Managed[kind] = meta.LenList(list)
		}
		if conditions == nil {
			return
		}
		s.Conflicts[kind] = 0
		for _, conds := range conditions() {
			k := ReasonKey{Kind: kind, Status: string(metav1.ConditionUnknown), Reason: ReasonNotReported}
			if cond := meta.FindStatusCondition(conds, condType); cond != nil {
				k.Status, k.Reason = string(cond.Status), cond.Reason
			}
			s.ByReason[k]++
			if k.Reason == oriav1alpha1.ReasonConflict {
				s.Conflicts[kind]++
			}
		}
	}
	policies := &oriav1alpha1.RBACPolicyList{}
	count(oriaKinds[0], policies, func() [][]metav1.Condition {
		return collect(policies.Items, func(o oriav1alpha1.RBACPolicy) []metav1.Condition { return o.Status.Conditions })
	}, oriav1alpha1.TypeReady, true)
	templates := &oriav1alpha1.ScopeTemplateList{}
	count(oriaKinds[1], templates, func() [][]metav1.Condition {
		return collect(templates.Items, func(o oriav1alpha1.ScopeTemplate) []metav1.Condition { return o.Status.Conditions })
	}, oriav1alpha1.TypeReady, true)
	instances := &oriav1alpha1.ScopeInstanceList{}
	count(oriaKinds[2], instances, func() [][]metav1.Condition {
		return collect(instances.Items, func(o oriav1alpha1.ScopeInstance) []metav1.Condition { return o.Status.Conditions })
	}, oriav1alpha1.TypeReady, true)
	extensions := &ocv1.ClusterExtensionList{}
	count("ClusterExtension", extensions, func() [][]metav1.Condition {
		return collect(extensions.Items, func(o ocv1.ClusterExtension) []metav1.Condition { return o.Status.Conditions })
	}, oriav1alpha1.TypeRBACManaged, false)
	for _, k := range rbacKinds {
		if n, ok := storeSize(ctx, r, k.obj); ok {
			s.Managed[k.kind] = n
			continue
		}
		count(k.kind, k.list(), nil, "", true, client.MatchingLabels{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue})
	}
	return s, errs
}

// storeSize counts the objects of obj's kind in r's informer, when r is a
// cache (the manager's, whose informers for these kinds hold only oria's
// objects: see manager.CacheOptions), without listing them: a list copies
// every object's struct on every scrape (docs/benchmarks.md, "Figures behind
// the code": metrics scrape).
func storeSize(ctx context.Context, r client.Reader, obj client.Object) (int, bool) {
	informers, ok := r.(cache.Informers)
	if !ok {
		return 0, false
	}
	inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return 0, false
	}
	st, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return 0, false
	}
	return len(st.GetStore().ListKeys()), true
}

func collect[T any](items []T, conds func(T) []metav1.Condition) [][]metav1.Condition {
	out := make([][]metav1.Condition, len(items))
	for i, o := range items {
		out[i] = conds(o)
	}
	return out
}
