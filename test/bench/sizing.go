package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// The sizing scenario (issue 34; not in all): what oria's memory grows by
// per extension, CRD, namespace, binding and RBAC object it did not create
// (the escalation guard's rules cache). For each, it adds -sizing-* of
// them, lets oria converge and settle, and measures oria's live heap after
// two forced collections (pprof's heap?gc=1, then go_memstats_heap_alloc_bytes)
// and its resident memory; then adds as many again and measures again. The
// cost per object is the second step's growth over its count: the first
// step pays for what a kind costs once (an informer, an index).

const scenarioSizing = "sizing"

// SizingStep is one sizing row: Added objects per step, and oria's live
// heap and RSS before the first step and after each.
type SizingStep struct {
	What      string   `json:"what"`
	Added     int      `json:"added"`
	HeapBytes [3]int64 `json:"heapBytes"`
	RSSBytes  [3]int64 `json:"rssBytes"`
}

// PerObject is the live heap the second step added per object.
func (s *SizingStep) PerObject() float64 {
	return float64(s.HeapBytes[2]-s.HeapBytes[1]) / float64(s.Added)
}

// sizingKind is one thing to add, named row: add(ctx, step, n) adds n
// more of it (step 0, then 1) and returns once oria has converged on them.
type sizingKind struct {
	row, what string
	n         int
	add       func(ctx context.Context, step, n int) error
}

func (b *bench) sizing(ctx context.Context) error {
	a := b.cfg.at
	// The namespaces the bindings and RBAC objects go into (two steps of
	// half of them), and two ScopeInstances that each bind all of them.
	s := newSpread("bench-sizing", a.SizingBindings, 2)
	half := max(a.SizingBindings/2, 1)
	kinds := []sizingKind{
		{"sizing-extensions", "ClusterExtension (Legacy, no CRD)", a.SizingExtensions, b.sizingExtensions},
		{"sizing-crds", "CRD (metadata; 4 generated ClusterRoles)", a.SizingCRDs, b.sizingCRDs},
		{"sizing-namespaces", "namespace (metadata)", half, func(ctx context.Context, step, n int) error { return b.sizingNamespaces(ctx, s, step, n) }},
		{"sizing-bindings", "RoleBinding of a ScopeInstance", a.SizingBindings, func(ctx context.Context, step, n int) error { return b.sizingBindings(ctx, s, step) }},
		{"sizing-rbac", "RBAC object oria did not create (Role or RoleBinding)", a.SizingRBAC, func(ctx context.Context, step, n int) error { return b.sizingRBAC(ctx, s, step, n) }},
	}
	for _, k := range kinds {
		r := &Result{Name: k.row, Objects: 2 * k.n, Sizing: &SizingStep{What: k.what, Added: k.n}}
		b.report.Results = append(b.report.Results, r)
		for step := range 3 {
			if step > 0 {
				b.logf("sizing: adding %d x %s", k.n, k.what)
				if err := k.add(ctx, step-1, k.n); err != nil {
					r.Error = err.Error()
					return err
				}
			}
			if err := b.settle(ctx, "before a sizing measurement"); err != nil {
				return err
			}
			heap, rss, err := b.liveHeap(ctx)
			if err != nil {
				return err
			}
			r.Sizing.HeapBytes[step], r.Sizing.RSSBytes[step] = heap, rss
		}
		r.Converged = true
		b.logf("sizing: %s: live heap %s -> %s -> %s: %.0f bytes each; RSS %s -> %s -> %s", k.what,
			fmtMB(r.Sizing.HeapBytes[0]), fmtMB(r.Sizing.HeapBytes[1]), fmtMB(r.Sizing.HeapBytes[2]), r.Sizing.PerObject(),
			fmtMB(r.Sizing.RSSBytes[0]), fmtMB(r.Sizing.RSSBytes[1]), fmtMB(r.Sizing.RSSBytes[2]))
	}
	return nil
}

// liveHeap makes oria collect its garbage twice and returns its live heap
// and resident memory then.
func (b *bench) liveHeap(ctx context.Context) (int64, int64, error) {
	for range 2 {
		if err := b.oria.get(ctx, "heap?gc=1"); err != nil {
			return 0, 0, err
		}
	}
	f, err := b.oria.metrics.families(ctx, "go_memstats_heap_alloc_bytes")
	if err != nil {
		return 0, 0, err
	}
	rss, err := procStatus(b.oria.Pid(), "VmRSS")
	if err != nil {
		return 0, 0, err
	}
	return int64(sum(f[0])), rss, nil
}

// get requests a pprof path of oria and discards the answer.
func (p *oriaProcess) get(ctx context.Context, query string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.PprofURL+"/"+query, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("pprof %s: %s", query, resp.Status)
	}
	return err
}

func sizingExtension(i int) string { return fmt.Sprintf("bench-sz-ext-%05d", i) }

// sizingExtensions adds n ClusterExtensions in Legacy mode, without CRDs,
// and waits until oria reported on each.
func (b *bench) sizingExtensions(ctx context.Context, step, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conds, err := observeConditions(ctx, b.watch.dyn, oriav1alpha1.TypeRBACManaged, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	if err != nil {
		return err
	}
	before := conds.count()
	if err := parallel(ctx, setupWorkers, n, func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, testutil.ClusterExtension(sizingExtension(step*n+i), oriav1alpha1.RBACModeLegacy))
	}); err != nil {
		return fmt.Errorf("creating ClusterExtensions: %w", err)
	}
	_, _, err = conds.waitCount(ctx, before+n, b.cfg.timeout)
	return err
}

// sizingCRDs adds n CRDs of the sizing extensions and waits for oria's
// 4·n ClusterRoles.
func (b *bench) sizingCRDs(ctx context.Context, step, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	roles, err := observe(ctx, b.watch.md, clusterRolesGVR, managedRoles)
	if err != nil {
		return err
	}
	before := roles.count()
	exts := 2 * b.cfg.at.SizingExtensions
	if err := parallel(ctx, setupWorkers, n, func(ctx context.Context, i int) error {
		j := step*n + i
		ext := sizingExtension(j % exts)
		return b.admin.Create(ctx, testutil.CRD(fmt.Sprintf("c%05d.sizing.bench.oria.example.com", j), "things", "Thing", ext))
	}); err != nil {
		return fmt.Errorf("creating CRDs: %w", err)
	}
	_, _, err = roles.waitCount(ctx, before+4*n, b.cfg.timeout)
	return err
}

// sizingNamespaces creates the spread's template (step 0) and n of its
// namespaces (half of them in each step).
func (b *bench) sizingNamespaces(ctx context.Context, s *spread, step, n int) error {
	if step == 0 {
		if err := b.admin.Create(ctx, spreadTemplate(s)); err != nil {
			return fmt.Errorf("creating ScopeTemplate: %w", err)
		}
	}
	ns := s.namespaces[min(step*n, len(s.namespaces)):min((step+1)*n, len(s.namespaces))]
	return parallel(ctx, setupWorkers, len(ns), func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, testutil.Namespace(ns[i], s.selector()))
	})
}

// sizingBindings creates the spread's instance step, which binds every
// namespace, and waits for its RoleBindings.
func (b *bench) sizingBindings(ctx context.Context, s *spread, step int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	one := &spread{name: s.name, role: s.role, namespaces: s.namespaces, instances: s.instances[step : step+1]}
	obs, err := observe(ctx, b.watch.md, roleBindingsGVR, one.instanceSelector())
	if err != nil {
		return err
	}
	if _, err := b.createInstances(ctx, one); err != nil {
		return err
	}
	_, _, err = obs.waitCount(ctx, one.bindings(), b.cfg.timeout)
	return err
}

// sizingRBAC creates n RBAC objects oria does not own, half Roles and half
// RoleBindings to them, over the spread's namespaces.
func (b *bench) sizingRBAC(ctx context.Context, s *spread, step, n int) error {
	return parallel(ctx, setupWorkers, n/2, func(ctx context.Context, i int) error {
		j := step*n/2 + i
		ns := s.namespaces[j%len(s.namespaces)]
		name := fmt.Sprintf("bench-sz-%06d", j)
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			},
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{testutil.User(name)},
		}
		if err := b.admin.Create(ctx, role); err != nil {
			return err
		}
		return b.admin.Create(ctx, rb)
	})
}
