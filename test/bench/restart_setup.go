package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// The restart scenario's world: what oria holds when it restarts or hands
// over (-restart-* flags; issue 34 asks for 100,000 bindings, 1,000
// extensions and 2,000 policies). Setup is not timed.

// restartSpread is the name of the scenario's ScopeTemplate (and prefix of
// its namespaces and instances).
const restartSpread = "bench-restart"

func restartExtension(i int) string { return fmt.Sprintf("bench-rs-ext-%04d", i) }

// restartCRD is extension i's one CRD (oria generates four ClusterRoles
// for it in Legacy mode).
func restartCRD(i int) crdName {
	return crdName{plural: "gadgets", kind: "Gadget", group: fmt.Sprintf("ext%04d.restart.bench.oria.example.com", i), extension: restartExtension(i)}
}

// restartPolicy returns policy i: view on extension i mod E's API, for a
// group, in one namespace of the spread.
func restartPolicy(i, extensions int, namespaces []string) *oriav1alpha1.RBACPolicy {
	e := i % extensions
	crd := restartCRD(e)
	return &oriav1alpha1.RBACPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-rs-pol-%04d", i)},
		Spec: oriav1alpha1.RBACPolicySpec{
			ExtensionName: restartExtension(e),
			Access:        oriav1alpha1.AccessView,
			Subjects:      spreadSubjects,
			Namespaces:    []string{namespaces[i%len(namespaces)]},
			APIs:          []oriav1alpha1.APIRef{{Group: crd.group, Resource: crd.plural}},
		},
	}
}

// setupRestart creates the world and waits until oria converged on it:
// every binding of the spread, every generated role, every policy Ready.
func (b *bench) setupRestart(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := b.cfg.at
	s := newSpread(restartSpread, a.RestartNamespaces, a.RestartInstances)
	if err := b.setupSpread(ctx, s); err != nil {
		return err
	}
	b.logf("restart: %d ScopeInstances, waiting for %d RoleBindings", len(s.instances), s.bindings())
	obs, err := observe(ctx, b.watch.md, roleBindingsGVR, s.instanceSelector())
	if err != nil {
		return err
	}
	if _, err := b.createInstances(ctx, s); err != nil {
		return fmt.Errorf("creating ScopeInstances: %w", err)
	}
	if _, _, err := obs.waitCount(ctx, s.bindings(), b.cfg.timeout); err != nil {
		return fmt.Errorf("the spread's RoleBindings: %w", err)
	}
	if a.RestartExtensions > 0 {
		if err := b.setupRestartExtensions(ctx, a.RestartExtensions); err != nil {
			return err
		}
	}
	if a.RestartPolicies > 0 {
		b.logf("restart: %d RBACPolicies", a.RestartPolicies)
		if err := parallel(ctx, setupWorkers, a.RestartPolicies, func(ctx context.Context, i int) error {
			return b.admin.Create(ctx, restartPolicy(i, a.RestartExtensions, s.namespaces))
		}); err != nil {
			return fmt.Errorf("creating RBACPolicies: %w", err)
		}
		if err := b.waitPoliciesReady(ctx, a.RestartPolicies); err != nil {
			return err
		}
	}
	return b.settle(ctx, "after the restart scenario's setup")
}

// setupRestartExtensions creates n ClusterExtensions in Legacy mode with
// one CRD each (a small schema: oria caches CRDs as metadata) and waits
// for the 4·n ClusterRoles oria generates.
func (b *bench) setupRestartExtensions(ctx context.Context, n int) error {
	b.logf("restart: %d CRDs and %d ClusterExtensions in Legacy mode, waiting for %d ClusterRoles", n, n, 4*n)
	roles, err := observe(ctx, b.watch.md, clusterRolesGVR, managedRoles)
	if err != nil {
		return err
	}
	before := roles.count()
	if err := parallel(ctx, setupWorkers, n, func(ctx context.Context, i int) error {
		c := restartCRD(i)
		return b.admin.Create(ctx, testutil.CRD(c.group, c.plural, c.kind, c.extension))
	}); err != nil {
		return fmt.Errorf("creating CRDs: %w", err)
	}
	if err := parallel(ctx, setupWorkers, n, func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, testutil.ClusterExtension(restartExtension(i), oriav1alpha1.RBACModeLegacy))
	}); err != nil {
		return fmt.Errorf("creating ClusterExtensions: %w", err)
	}
	if _, _, err := roles.waitCount(ctx, before+4*n, b.cfg.timeout); err != nil {
		return fmt.Errorf("the extensions' ClusterRoles: %w", err)
	}
	return nil
}

// waitPoliciesReady waits until n RBACPolicies are Ready.
func (b *bench) waitPoliciesReady(ctx context.Context, n int) error {
	deadline := time.Now().Add(b.cfg.timeout)
	for {
		list := &oriav1alpha1.RBACPolicyList{}
		if err := b.admin.List(ctx, list); err != nil {
			return err
		}
		ready, reasons := 0, map[string]int{}
		for _, p := range list.Items {
			if c := meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady); c != nil && c.Status == metav1.ConditionTrue {
				ready++
			} else if c != nil {
				reasons[c.Reason]++
			}
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d RBACPolicies Ready after %s (not Ready: %v)", ready, n, b.cfg.timeout, reasons)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// count is how many objects o has seen.
func (o *observer) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// managedCounts returns what oria holds, from its oria_managed_objects
// gauge, for the log: "RoleBinding 100000, ClusterRole 4003, ...".
func (b *bench) managedCounts(ctx context.Context) (map[string]int, error) {
	f, err := b.oria.metrics.families(ctx, "oria_managed_objects")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for k, v := range sumBy(f[0], "kind") {
		out[k] = int(v)
	}
	return out, nil
}

// bindingsHeld is the RoleBindings and ClusterRoleBindings among counts.
func bindingsHeld(counts map[string]int) int {
	return counts["RoleBinding"] + counts["ClusterRoleBinding"]
}

// describeCounts shows counts in a stable order.
func describeCounts(counts map[string]int) string {
	var parts []string
	for _, k := range []string{"RoleBinding", "ClusterRoleBinding", "ClusterRole", "ScopeInstance", "ScopeTemplate", "RBACPolicy"} {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
