package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

const (
	// labelSpread marks the namespaces of a spread with its name.
	labelSpread = "bench.oria.operatorframework.io/spread"
	// newNamespaceTimeout bounds the wait for one new namespace's binding.
	newNamespaceTimeout = 30 * time.Second
)

var spreadSubjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "bench-readers"}}

// spread is the input of a fan-out: namespaces labelled for a selector, a
// ScopeTemplate with one inline ClusterRole, and ScopeInstances of it that
// all select those namespaces, so that oria writes one RoleBinding per
// instance and namespace.
type spread struct {
	name       string // the ScopeTemplate's name, prefix of everything else
	role       string // the template's ClusterRole
	namespaces []string
	instances  []string
	// publication, when set, is every instance's spec.publication (one
	// instance: the fanout-publish row).
	publication *oriav1alpha1.Publication
}

func newSpread(name string, namespaces, instances int) *spread {
	s := &spread{name: name, role: name + "-reader", namespaces: make([]string, namespaces), instances: make([]string, instances)}
	for i := range s.namespaces {
		s.namespaces[i] = fmt.Sprintf("%s-%05d", name, i)
	}
	for i := range s.instances {
		s.instances[i] = fmt.Sprintf("%s-%02d", name, i)
	}
	if instances == 1 {
		s.instances[0] = name
	}
	return s
}

func (s *spread) selector() map[string]string { return map[string]string{labelSpread: s.name} }

// bindings is the number of RoleBindings oria must create.
func (s *spread) bindings() int { return len(s.namespaces) * len(s.instances) }

// instanceSelector selects the RoleBindings oria creates for the instances.
func (s *spread) instanceSelector() string {
	values := make([]string, len(s.instances))
	for i, name := range s.instances {
		values[i] = names.LabelValue(name)
	}
	return fmt.Sprintf("%s in (%s)", oriav1alpha1.LabelScopeInstance, strings.Join(values, ","))
}

// setupSpread creates the spread's namespaces and template (not timed).
func (b *bench) setupSpread(ctx context.Context, s *spread) error {
	b.logf("creating %d namespaces and ScopeTemplate %s", len(s.namespaces), s.name)
	if err := parallel(ctx, setupWorkers, len(s.namespaces), func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, testutil.Namespace(s.namespaces[i], s.selector()))
	}); err != nil {
		return fmt.Errorf("creating namespaces: %w", err)
	}
	if err := b.admin.Create(ctx, spreadTemplate(s)); err != nil {
		return fmt.Errorf("creating ScopeTemplate: %w", err)
	}
	return b.settle(ctx, "after creating namespaces")
}

// spreadTemplate is the spread's ScopeTemplate: one inline ClusterRole,
// bound to spreadSubjects.
func spreadTemplate(s *spread) *oriav1alpha1.ScopeTemplate {
	return &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{{
				Name:  s.role,
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
			}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: spreadSubjects},
		},
	}
}

// measureSpread measures the spread's row in rounds (measureRounds): the
// floors create the same RoleBindings with a plain client, oria converges
// the spread's ScopeInstances, and between rounds the instances and their
// RoleBindings (and publication) are deleted again. It returns the last
// round's observer of oria's RoleBindings, which goes on watching.
func (b *bench) measureSpread(ctx context.Context, r *Result, s *spread, rounds int) (*observer, error) {
	// Each round's observer stops when the round is undone; the last
	// one's with ctx.
	var obs *observer
	stop := func() {}
	err := b.measureRounds(ctx, r, rounds, phases{
		floors: func(ctx context.Context, rr *Result, warmup bool) error {
			// The floor from the apply first: cold, before the warmed
			// floor's untimed run.
			if err := b.measureApplyFloor(ctx, rr, s); err != nil {
				return err
			}
			return b.measureFloors(ctx, rr, warmup, func(ctx context.Context, f *floor) (time.Duration, error) {
				return f.roleBindings(ctx, s.namespaces, s.instances, s.name, s.role, spreadSubjects)
			}, func(ctx context.Context) error {
				return b.deleteSpreadBindings(ctx, s, client.HasLabels{labelFloor})
			})
		},
		oria: func(ctx context.Context, rr *Result) error {
			var roundCtx context.Context
			roundCtx, stop = context.WithCancel(ctx)
			var err error
			obs, err = b.convergeSpread(roundCtx, rr, s)
			return err
		},
		undo: func(ctx context.Context) error {
			stop()
			return b.undoSpread(ctx, s)
		},
	})
	return obs, err
}

// undoSpread deletes the spread's ScopeInstances, then their RoleBindings
// (the benchmark runs no garbage collector) and the publication's
// ConfigMap.
func (b *bench) undoSpread(ctx context.Context, s *spread) error {
	for _, name := range s.instances {
		if err := b.admin.Delete(ctx, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	sel, err := labels.Parse(s.instanceSelector())
	if err != nil {
		return err
	}
	if err := b.deleteSpreadBindings(ctx, s, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return err
	}
	if p := s.publication; p != nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.ConfigMap.Namespace, Name: p.ConfigMap.Name}}
		return client.IgnoreNotFound(b.admin.Delete(ctx, cm))
	}
	return nil
}

// deleteSpreadBindings deletes the RoleBindings matching sel in the
// spread's namespaces.
func (b *bench) deleteSpreadBindings(ctx context.Context, s *spread, sel client.DeleteAllOfOption) error {
	return parallel(ctx, setupWorkers, len(s.namespaces), func(ctx context.Context, i int) error {
		return b.admin.DeleteAllOf(ctx, &rbacv1.RoleBinding{}, client.InNamespace(s.namespaces[i]), sel)
	})
}

// convergeSpread creates the spread's ScopeInstances at once and measures
// the time until all their RoleBindings exist (and, with a publication,
// until its ConfigMap lists every namespace). The observer goes on
// watching the instances' RoleBindings.
func (b *bench) convergeSpread(ctx context.Context, r *Result, s *spread) (*observer, error) {
	b.logf("oria: creating %d ScopeInstance(s) %s; waiting for %d RoleBindings", len(s.instances), s.instances[0], s.bindings())
	obs, err := observe(ctx, b.watch.md, roleBindingsGVR, s.instanceSelector())
	if err != nil {
		return nil, err
	}
	var pub *publicationWait
	var t0, admitted time.Time
	err = b.converge(ctx, r, obs, s.bindings(), func(ctx context.Context) error {
		t0 = time.Now()
		if s.publication != nil {
			pub = b.startPublicationWait(ctx, s.publication, len(s.namespaces))
		}
		var err error
		admitted, err = b.createInstances(ctx, s)
		return err
	})
	if err == nil && r.Converged {
		// converge's clock started a moment before t0.
		r.breakdown().Oria = &Phases{Admitted: admitted.Sub(t0).Seconds(), First: r.FirstSeconds, Last: r.Seconds}
		b.logf("%s: oria: %s", r.Name, r.Breakdown.Oria)
	}
	if pub != nil && err == nil && r.Converged {
		pub.finish(r, b.logf)
	}
	return obs, err
}

// fanout is scenario 2: one ScopeInstance selecting N namespaces, then M new
// namespaces one at a time.
func (b *bench) fanout(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newSpread("bench-fanout", b.cfg.namespaces, 1)
	r := &Result{Name: scenarioFanout, Objects: s.bindings()}
	b.report.Results = append(b.report.Results, r)
	if err := b.setupSpread(ctx, s); err != nil {
		return err
	}
	obs, err := b.measureSpread(ctx, r, s, b.cfg.repeat)
	if err != nil || !r.Converged {
		return err
	}
	return b.newNamespaces(ctx, obs, s)
}

// scale is scenario 3: I ScopeInstances each selecting the same N
// namespaces, I x N RoleBindings at once (10 x 5,000 = 50,000 by default).
func (b *bench) scale(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newSpread("bench-scale", b.cfg.scaleNamespaces, b.cfg.scaleInstances)
	r := &Result{Name: scenarioScale, Objects: s.bindings()}
	b.report.Results = append(b.report.Results, r)
	if err := b.setupSpread(ctx, s); err != nil {
		return err
	}
	// One round: each phase takes a minute, long enough to be steady.
	_, err := b.measureSpread(ctx, r, s, 1)
	return err
}

// newNamespaces is the second half of scenario 2: M more namespaces of the
// spread, created one at a time, each after the previous one's RoleBinding
// appeared. -new-namespaces=0 skips it.
func (b *bench) newNamespaces(ctx context.Context, obs *observer, s *spread) error {
	if b.cfg.newNamespaces == 0 {
		return nil
	}
	nr := &Result{Name: scenarioNewNamespaces, Objects: b.cfg.newNamespaces}
	b.report.Results = append(b.report.Results, nr)
	b.logf("oria: creating %d new namespaces one by one", b.cfg.newNamespaces)
	sp, err := b.begin(ctx, nr.Name)
	if err != nil {
		return err
	}
	var lat []time.Duration
	for i := range b.cfg.newNamespaces {
		ns := fmt.Sprintf("bench-new-%04d", i)
		t0 := time.Now()
		if err := b.admin.Create(ctx, testutil.Namespace(ns, s.selector())); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		at, err := obs.waitNamespace(ctx, ns, newNamespaceTimeout)
		if err != nil {
			nr.Error = err.Error()
			break
		}
		lat = append(lat, at.Sub(t0))
	}
	nr.Converged = len(lat) == b.cfg.newNamespaces
	nr.Latency = newLatency(lat)
	if err := b.waitQuiet(ctx, "after new namespaces"); err != nil {
		return err
	}
	return b.end(ctx, sp, nr)
}
