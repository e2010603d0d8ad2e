package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// The floor from the user's apply (-apply-floor, issue 34). The warmed
// floor (floor.go) starts its clock at its first RoleBinding request, after
// an untimed run, with 32 workers; oria's clock starts at the user's create
// of the ScopeInstance, which the escalation guard admits first. This floor
// starts where oria's does: the same create of the row's ScopeInstances, by
// the same client, through the guard, as a server-side dry run (admitted
// by every admission step, the guard included, then not stored, so that
// oria does not react to it); then -apply-floor-workers workers (16) of a
// plain client without a client-side limit create the RoleBindings oria
// would, untimed run first: none (cold). Its time runs to the last
// RoleBinding seen by a watch, as oria's.

// Phases are the moments of one fan-out, in seconds from the user's apply:
// where the time goes.
type Phases struct {
	// Admitted: every create of the row's ScopeInstances answered (the
	// escalation guard's admission, and for oria the object stored).
	Admitted float64 `json:"admitted"`
	// First and Last: the first and the last RoleBinding seen by a watch.
	First float64 `json:"first"`
	Last  float64 `json:"last"`
	// Answered (floors only): the last RoleBinding create answered; Last
	// minus Answered is the watch's lag.
	Answered float64 `json:"answered,omitempty"`
}

func (p *Phases) String() string {
	if p == nil {
		return "-"
	}
	s := fmt.Sprintf("admitted %s, first binding %s", fmtSeconds(p.Admitted), fmtSeconds(p.First))
	if p.Answered > 0 {
		s += fmt.Sprintf(", last create answered %s", fmtSeconds(p.Answered))
	}
	s += ", last binding seen " + fmtSeconds(p.Last)
	if p.Answered > 0 {
		s += fmt.Sprintf(" (watch lag %s)", fmtSeconds(max(p.Last-p.Answered, 0)))
	}
	return s
}

// Breakdown is where a fan-out row's time went, oria's and the floor's
// from the apply, in the row's (median) round.
type Breakdown struct {
	Oria       *Phases `json:"oria,omitempty"`
	ApplyFloor *Phases `json:"applyFloor,omitempty"`
}

// breakdown returns r's Breakdown, made when missing.
func (r *Result) breakdown() *Breakdown {
	if r.Breakdown == nil {
		r.Breakdown = &Breakdown{}
	}
	return r.Breakdown
}

// ApplyRatio returns oria's time over the floor from the apply, 0 when
// either is unknown.
func (r *Result) ApplyRatio() float64 { return ratio(r.Seconds, r.ApplyFloorSeconds) }

// instanceObject returns the spread's i-th ScopeInstance as the user
// applies it.
func (s *spread) instanceObject(i int) *oriav1alpha1.ScopeInstance {
	return &oriav1alpha1.ScopeInstance{
		ObjectMeta: metav1.ObjectMeta{Name: s.instances[i]},
		Spec: oriav1alpha1.ScopeInstanceSpec{
			ScopeTemplateName: s.name,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: s.selector()},
			Publication:       s.publication,
		},
	}
}

// createInstances creates the spread's ScopeInstances as the user does,
// in parallel, with opts (a dry run for the floor), and returns when every
// create was answered.
func (b *bench) createInstances(ctx context.Context, s *spread, opts ...client.CreateOption) (time.Time, error) {
	err := parallel(ctx, setupWorkers, len(s.instances), func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, s.instanceObject(i), opts...)
	})
	return time.Now(), err
}

// measureApplyFloor times the floor from the user's apply for a fan-out
// row (nothing without -apply-floor or with -no-floor), then deletes its
// RoleBindings and lets the cluster settle. It profiles the API server as
// the other floors' phases (-profile).
func (b *bench) measureApplyFloor(ctx context.Context, r *Result, s *spread) error {
	f := b.applyFloor
	if f == nil {
		return nil
	}
	phase := "floor-" + r.Name + "-apply"
	b.logf("floor (%s): a dry-run create of %d ScopeInstance(s) through the guard, then %d RoleBindings", f.name, len(s.instances), s.bindings())
	b.apiserver.snapshot(ctx, phase+"-begin")
	b.apiserver.startCPUProfile(ctx, phase)
	watch := b.apiserver.state(ctx)
	cp, own := b.controlPlaneCPU(), selfCPU()
	p, err := b.fromApply(ctx, f, s)
	if err != nil {
		return err
	}
	b.logf("floor (%s): %s; CPU: client %.2fs, control plane %.2fs; objects per second %s", f.name, p, selfCPU()-own, b.controlPlaneCPU()-cp, f.timeline)
	b.logf("floor (%s): API server watches: %s", f.name, b.apiserver.watchSince(ctx, watch))
	b.apiserver.snapshot(ctx, phase+"-end")
	r.ApplyFloorSeconds = p.Last
	r.breakdown().ApplyFloor = p
	if err := b.deleteSpreadBindings(ctx, s, client.HasLabels{labelFloor}); err != nil {
		return fmt.Errorf("deleting the floor's objects: %w", err)
	}
	return b.settle(ctx, "after the floor from the apply")
}

// fromApply runs the floor from the apply once: the dry-run create of the
// instances, then f's workers create the RoleBindings.
func (b *bench) fromApply(ctx context.Context, f *floor, s *spread) (*Phases, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rbs := floorRoleBindings(s.namespaces, s.instances, s.name, s.role, spreadSubjects)
	obs, err := observe(ctx, f.watch.md, roleBindingsGVR, labelFloor)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	admitted, err := b.createInstances(ctx, s, client.DryRunAll)
	if err != nil {
		return nil, fmt.Errorf("floor: the apply (a dry run): %w", err)
	}
	if err := parallel(ctx, f.workers, len(rbs), func(ctx context.Context, i int) error {
		return f.createRoleBinding(ctx, rbs[i])
	}); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	answered := time.Now()
	first, last, err := obs.waitCount(ctx, len(rbs), f.timeout)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	f.timeline = obs.timeline(t0)
	since := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	return &Phases{Admitted: since(admitted), First: since(first), Answered: since(answered), Last: since(last)}, nil
}
