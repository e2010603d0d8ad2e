package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/manager"
)

// labelFloor marks the floor's objects. They do not carry oria's
// managed-by label, so oria's label-filtered caches never see them.
const labelFloor = "bench.oria.operatorframework.io/floor"

var (
	clusterRolesGVR = rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	roleBindingsGVR = rbacv1.SchemeGroupVersion.WithResource("rolebindings")
)

// parallel runs fn(i) for every i in [0, n) on at most workers goroutines
// and returns the first error; the other calls are then cancelled.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// floor is a plain client-go client with a pool of workers: the physical
// reference for how fast the API server takes the objects oria creates.
// The benchmark measures it without a client-side limit and, when oria has
// one, at oria's QPS and burst.
type floor struct {
	// limited is set for the floor at oria's QPS and burst.
	limited bool
	name    string
	cs      kubernetes.Interface
	dyn     dynamic.Interface // writes
	watch   watchClients
	workers int
	timeout time.Duration
	// apply writes with server-side apply, as oria does, instead of create.
	apply bool
	// timeline is the last run's objects per second (observer.timeline),
	// detail what else it waited for, and when that was there.
	timeline, detail string
}

// newFloor returns a floor client; a negative qps means no client-side
// limit.
func newFloor(cfg *rest.Config, qps float64, burst, workers int, timeout time.Duration, apply bool) (*floor, error) {
	cfg = rest.CopyConfig(cfg)
	manager.SetClientRateLimit(cfg, qps, burst)
	cfg.UserAgent = "oria-bench-floor"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	watch, err := newWatchClients(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := &floor{limited: qps > 0, name: "no client limit", cs: cs, dyn: dyn, watch: watch, workers: workers, timeout: timeout, apply: apply}
	if f.limited {
		f.name = fmt.Sprintf("qps %g, burst %d", qps, burst)
	}
	return f, nil
}

// expected is something else a timed phase waits for: n objects seen by
// obs.
type expected struct {
	obs  *observer
	n    int
	what string
}

// run sends the requests do(0) ... do(requests-1) on the worker pool and
// returns the time from the first request until the watch has seen all n
// objects, and until every other expected thing had arrived too (then the
// phase's time), the same way oria's are observed.
func (f *floor) run(ctx context.Context, gvr schema.GroupVersionResource, n, requests int, do func(ctx context.Context, i int) error, others ...expected) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs, err := observe(ctx, f.watch.md, gvr, labelFloor)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := parallel(ctx, f.workers, requests, do); err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	_, last, err := obs.waitCount(ctx, n, f.timeout)
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	f.timeline, f.detail = obs.timeline(start), ""
	for _, o := range others {
		_, at, err := o.obs.waitCount(ctx, o.n, f.timeout)
		if err != nil {
			return 0, fmt.Errorf("floor: %s: %w", o.what, err)
		}
		f.detail += fmt.Sprintf("; objects after %.2fs, %s after %.2fs", last.Sub(start).Seconds(), o.what, at.Sub(start).Seconds())
		last = maxTime(last, at)
	}
	return last.Sub(start), nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The floor writes the objects oria writes, built by oria's own pure
// functions (extension.DesiredRoles, binding.RoleBindings): the same rules,
// subjects, annotations and owner references, and as many labels of the
// same size. Only their names and label keys differ (floorObject), so that
// neither oria's caches nor the observers of oria's objects see them. A
// RoleBinding with oria's three labels and controller reference costs the
// API server about 15 % more than one with a single label and none (2,000
// creates at 32 workers: 1,560-1,730/s against 1,830-1,880/s), so a floor
// of smaller objects would be that much too fast.

// floorUID is the UID in the floor objects' owner references: no such owner
// exists (the benchmark runs no garbage collector).
const floorUID = types.UID("00000000-0000-0000-0000-00000000f100")

// floorObject renames obj for the floor: "bench-floor-" before its name,
// and its labels under keys that start with "floor." (the same count and
// about the same size), plus labelFloor.
func floorObject(obj metav1.Object) {
	obj.SetName("bench-floor-" + obj.GetName())
	labels := map[string]string{labelFloor: "true"}
	for k, v := range obj.GetLabels() {
		labels["floor."+k] = v
	}
	obj.SetLabels(labels)
}

// annotationFloorTrigger is the annotation the floor sets on every
// ClusterExtension, the request that triggers oria in scenario 1 (oria
// reads only its mode annotation, so this one triggers nothing).
const annotationFloorTrigger = "bench.oria.operatorframework.io/floor-trigger"

// extensions sends the requests of scenario 1: the trigger's patch on each
// ClusterExtension, then each extension's ClusterRoles (the four roles oria
// generates per CRD in Legacy mode) followed by its condition. Its time
// runs until the roles and the conditions are all there.
func (f *floor) extensions(ctx context.Context, crds []crdName) (time.Duration, error) {
	byExtension := map[string][]string{}
	var order []string
	for _, c := range crds {
		if _, ok := byExtension[c.extension]; !ok {
			order = append(order, c.extension)
		}
		byExtension[c.extension] = append(byExtension[c.extension], c.String())
	}
	trigger := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, annotationFloorTrigger))
	var requests []func(context.Context) error
	for _, ext := range order {
		requests = append(requests, func(ctx context.Context) error {
			_, err := f.dyn.Resource(clusterExtensionsGVR).Patch(ctx, ext, types.MergePatchType, trigger, metav1.PatchOptions{})
			return err
		})
	}
	roles := 0
	for _, ext := range order {
		for _, cr := range extension.DesiredRoles(extension.Extension{Name: ext, UID: floorUID}, byExtension[ext], oriav1alpha1.RBACModeLegacy, nil) {
			floorObject(cr)
			roles++
			requests = append(requests, func(ctx context.Context) error { return f.createClusterRole(ctx, cr) })
		}
		requests = append(requests, func(ctx context.Context) error {
			return applyFloorCondition(ctx, f.dyn, ext, floorConditionType, len(byExtension[ext]))
		})
	}
	conds, err := observeConditions(ctx, f.watch.dyn, floorConditionType, metav1.ConditionTrue, "Legacy")
	if err != nil {
		return 0, err
	}
	return f.run(ctx, clusterRolesGVR, roles, len(requests), func(ctx context.Context, i int) error { return requests[i](ctx) },
		expected{obs: conds, n: len(order), what: "conditions"})
}

// createClusterRole creates cr (the clientset does not change what it
// sends), or applies it with -floor-apply.
func (f *floor) createClusterRole(ctx context.Context, cr *rbacv1.ClusterRole) error {
	if f.apply {
		return applyJSON(cr, func(data []byte) error {
			_, err := f.cs.RbacV1().ClusterRoles().Patch(ctx, cr.Name, types.ApplyPatchType, data, applyOptions)
			return err
		})
	}
	_, err := f.cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})
	return err
}

// roleBindings creates the RoleBindings of the fan-out scenarios: those of
// len(instances) ScopeInstances of template binding role to subjects in
// every namespace.
func (f *floor) roleBindings(ctx context.Context, namespaces, instances []string, template, role string, subjects []rbacv1.Subject) (time.Duration, error) {
	rbs := floorRoleBindings(namespaces, instances, template, role, subjects)
	return f.run(ctx, roleBindingsGVR, len(rbs), len(rbs), func(ctx context.Context, i int) error {
		return f.createRoleBinding(ctx, rbs[i])
	})
}

// floorRoleBindings returns the floor's copies of the RoleBindings oria
// writes for instances of template binding role to subjects in namespaces.
func floorRoleBindings(namespaces, instances []string, template, role string, subjects []rbacv1.Subject) []*rbacv1.RoleBinding {
	var rbs []*rbacv1.RoleBinding
	for _, name := range instances {
		inst := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name, UID: floorUID}}
		rbs = append(rbs, binding.RoleBindings(inst, template, []string{role}, subjects, namespaces)...)
	}
	for _, rb := range rbs {
		floorObject(rb)
	}
	return rbs
}

// createRoleBinding creates rb (the clientset does not change what it
// sends), or applies it with -floor-apply.
func (f *floor) createRoleBinding(ctx context.Context, rb *rbacv1.RoleBinding) error {
	if f.apply {
		return applyJSON(rb, func(data []byte) error {
			_, err := f.cs.RbacV1().RoleBindings(rb.Namespace).Patch(ctx, rb.Name, types.ApplyPatchType, data, applyOptions)
			return err
		})
	}
	_, err := f.cs.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{})
	return err
}

var applyOptions = metav1.PatchOptions{FieldManager: "bench-floor", Force: ptr(true)}

// applyJSON marshals obj as an apply patch and sends it with patch.
func applyJSON(obj any, patch func([]byte) error) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return patch(data)
}
