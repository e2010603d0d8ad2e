package main

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/operator-framework/oria/internal/manager"
)

// The expiry scenario's floors: context for the large grant's bindings,
// which its access no longer waits for (the grant is gated: its access
// starts and ends with its gate). Its RoleBindings are made while it is
// pending and deleted after expiresAt by oria alone: nobody's request
// starts either, so the floors start their clock at their first request,
// and run cold (no warm-up), with the workers of the floor from the apply
// (-apply-floor-workers, 16) and no client-side limit. The create floor
// makes the RoleBindings oria would (floorRoleBindings) in the grant's
// namespaces; once the cluster has settled, the delete floor deletes them
// again. Each runs until a watch has seen the last object arrive, or go.

// expiryFloors times the floors of the large grant of s: nl's (create) and
// rl's (delete). Nothing with -no-floor.
func (b *bench) expiryFloors(ctx context.Context, s *spread, nl, rl *GateFigures) error {
	if b.cfg.noFloor {
		return nil
	}
	f, err := newFloor(b.restConfig, manager.NoClientRateLimit, b.cfg.burst, b.cfg.at.ApplyFloorWorkers, b.cfg.timeout, false)
	if err != nil {
		return err
	}
	f.name = fmt.Sprintf("%d workers, cold", f.workers)
	b.logf("floor (%s): creating the %d RoleBindings of the large grant", f.name, len(s.namespaces))
	cp := b.controlPlaneCPU()
	d, err := f.roleBindings(ctx, s.namespaces, s.instances, s.name, s.role, spreadSubjects)
	if err != nil {
		return err
	}
	nl.FloorSeconds, nl.FloorControlPlaneCPUSeconds = d.Seconds(), b.controlPlaneCPU()-cp
	b.logf("floor (%s): created in %s, control plane CPU %.2fs; objects per second %s", f.name, fmtSeconds(d.Seconds()), nl.FloorControlPlaneCPUSeconds, f.timeline)
	if err := b.settle(ctx, "after the create floor"); err != nil {
		return err
	}
	cp = b.controlPlaneCPU()
	if d, err = f.deleteRoleBindings(ctx, floorRoleBindings(s.namespaces, s.instances, s.name, s.role, spreadSubjects)); err != nil {
		return err
	}
	rl.FloorSeconds, rl.FloorControlPlaneCPUSeconds = d.Seconds(), b.controlPlaneCPU()-cp
	b.logf("floor (%s): deleted in %s, control plane CPU %.2fs", f.name, fmtSeconds(d.Seconds()), rl.FloorControlPlaneCPUSeconds)
	return b.settle(ctx, "after the delete floor")
}

// deleteRoleBindings deletes rbs on f's workers (plain deletes) and returns
// the time from the first request until a watch has seen every deletion.
func (f *floor) deleteRoleBindings(ctx context.Context, rbs []*rbacv1.RoleBinding) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs, err := observeBy(ctx, f.watch.md, roleBindingsGVR, labelFloor, "")
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := parallel(ctx, f.workers, len(rbs), func(ctx context.Context, i int) error {
		return f.cs.RbacV1().RoleBindings(rbs[i].Namespace).Delete(ctx, rbs[i].Name, metav1.DeleteOptions{})
	}); err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	_, last, err := obs.waitDeleted(ctx, len(rbs), f.timeout)
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	return last.Sub(start), nil
}
