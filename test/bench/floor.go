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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/internal/names"
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
	md      metadata.Interface
	workers int
	timeout time.Duration
	// apply writes with server-side apply, as oria does, instead of create.
	apply bool
	// timeline is the last run's objects per second (observer.timeline).
	timeline string
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
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := &floor{limited: qps > 0, name: "no client limit", cs: cs, md: md, workers: workers, timeout: timeout, apply: apply}
	if f.limited {
		f.name = fmt.Sprintf("qps %g, burst %d", qps, burst)
	}
	return f, nil
}

// run creates n objects with create(i) on the worker pool and returns the
// time from the first request until the watch has seen all of them, the
// same way oria's objects are observed.
func (f *floor) run(ctx context.Context, gvr schema.GroupVersionResource, n int, create func(ctx context.Context, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs, err := observe(ctx, f.md, gvr, labelFloor)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := parallel(ctx, f.workers, n, create); err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	_, last, err := obs.waitCount(ctx, n, f.timeout)
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	f.timeline = obs.timeline(start)
	return last.Sub(start), nil
}

// clusterRoles creates the ClusterRoles of scenario 1: the four roles oria
// generates for each CRD, with the same rules.
func (f *floor) clusterRoles(ctx context.Context, crds []crdName) (time.Duration, error) {
	kinds := names.RoleKinds
	return f.run(ctx, clusterRolesGVR, len(crds)*len(kinds), func(ctx context.Context, i int) error {
		crd, kind := crds[i/len(kinds)], kinds[i%len(kinds)]
		cr := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{
				Name: "bench-floor-" + names.ExtensionRole(crd.String(), kind),
				Labels: map[string]string{
					labelFloor:                  "true",
					oriav1alpha1.LabelExtension: crd.extension,
					oriav1alpha1.LabelRole:      string(kind),
				},
				Annotations: map[string]string{oriav1alpha1.AnnotationCRD: crd.String()},
			},
			Rules: extension.RoleRules(crd.String(), kind),
		}
		if f.apply {
			cr.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"}
			return applyJSON(cr, func(data []byte) error {
				_, err := f.cs.RbacV1().ClusterRoles().Patch(ctx, cr.Name, types.ApplyPatchType, data, applyOptions)
				return err
			})
		}
		_, err := f.cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})
		return err
	})
}

// roleBindings creates perNamespace RoleBindings of role in each namespace,
// as the fan-out scenarios expect of oria (one per ScopeInstance).
func (f *floor) roleBindings(ctx context.Context, namespaces []string, perNamespace int, role string, subjects []rbacv1.Subject) (time.Duration, error) {
	return f.run(ctx, roleBindingsGVR, len(namespaces)*perNamespace, func(ctx context.Context, i int) error {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("bench-floor-%s-%d", role, i%perNamespace),
				Namespace: namespaces[i/perNamespace],
				Labels:    map[string]string{labelFloor: "true"},
			},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: subjects,
		}
		if f.apply {
			rb.TypeMeta = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"}
			return applyJSON(rb, func(data []byte) error {
				_, err := f.cs.RbacV1().RoleBindings(rb.Namespace).Patch(ctx, rb.Name, types.ApplyPatchType, data, applyOptions)
				return err
			})
		}
		_, err := f.cs.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{})
		return err
	})
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
