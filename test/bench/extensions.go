package main

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// crdName identifies one benchmark CRD, <plural>.<group>, and its extension.
type crdName struct{ plural, kind, group, extension string }

func (c crdName) String() string { return c.plural + "." + c.group }

func extensionName(e int) string { return fmt.Sprintf("bench-ext-%03d", e) }

// benchCRDs returns the C CRDs of each of E extensions, in creation order.
func benchCRDs(e, c int) []crdName {
	out := make([]crdName, 0, e*c)
	for i := range e {
		for j := range c {
			out = append(out, crdName{plural: fmt.Sprintf("widget%ds", j), kind: fmt.Sprintf("Widget%d", j), group: fmt.Sprintf("ext%03d.bench.oria.example.com", i), extension: extensionName(i)})
		}
	}
	return out
}

// extensions is scenario 1: E extensions x C CRDs switched to Legacy.
func (b *bench) extensions(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	crds := benchCRDs(b.cfg.extensions, b.cfg.crds)
	r := &Result{Name: scenarioExtensions, Objects: 4 * len(crds)}
	b.report.Results = append(b.report.Results, r)

	schema := bigSchema(b.cfg.schemaKB << 10)
	b.logf("creating %d CRDs (%d KB schemas) and %d ClusterExtensions", len(crds), b.cfg.schemaKB, b.cfg.extensions)
	if err := parallel(ctx, setupWorkers, len(crds), func(ctx context.Context, i int) error {
		c := crds[i]
		crd := testutil.CRD(c.group, c.plural, c.kind, c.extension)
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema = schema
		return b.admin.Create(ctx, crd)
	}); err != nil {
		return fmt.Errorf("creating CRDs: %w", err)
	}
	if err := parallel(ctx, setupWorkers, b.cfg.extensions, func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, testutil.ClusterExtension(extensionName(i), ""))
	}); err != nil {
		return fmt.Errorf("creating ClusterExtensions: %w", err)
	}
	if err := b.settle(ctx, "after creating CRDs"); err != nil {
		return err
	}

	return b.measureRounds(ctx, r, b.cfg.repeat, phases{
		floors: func(ctx context.Context, rr *Result, warmup bool) error {
			return b.measureFloors(ctx, rr, warmup, func(ctx context.Context, f *floor) (time.Duration, error) {
				return f.extensions(ctx, crds)
			}, b.cleanFloorExtensions)
		},
		oria: b.convergeExtensions,
		undo: b.undoExtensions,
	})
}

// managedRoles selects the ClusterRoles oria generates for extensions.
var managedRoles = labels.SelectorFromSet(labels.Set{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}).String() + "," + oriav1alpha1.LabelExtension

// setModes patches every extension's mode annotation (the trigger).
func (b *bench) setModes(ctx context.Context, mode oriav1alpha1.RBACMode) error {
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, oriav1alpha1.AnnotationRBACMode, mode))
	return parallel(ctx, setupWorkers, b.cfg.extensions, func(ctx context.Context, i int) error {
		ce := testutil.ClusterExtension(extensionName(i), "")
		return b.admin.Patch(ctx, ce, client.RawPatch(types.MergePatchType, patch))
	})
}

// convergeExtensions switches every extension to Legacy and measures the
// time until oria's ClusterRoles exist and every condition says Legacy.
func (b *bench) convergeExtensions(ctx context.Context, r *Result) error {
	b.logf("oria: switching %d ClusterExtensions to Legacy; waiting for %d ClusterRoles and %d conditions", b.cfg.extensions, r.Objects, b.cfg.extensions)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs, err := observe(ctx, b.watch.md, clusterRolesGVR, managedRoles)
	if err != nil {
		return err
	}
	conds, err := observeConditions(ctx, b.watch.dyn, oriav1alpha1.TypeRBACManaged, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
	if err != nil {
		return err
	}
	var t0 time.Time
	if err := b.converge(ctx, r, obs, r.Objects, func(ctx context.Context) error {
		t0 = time.Now()
		return b.setModes(ctx, oriav1alpha1.RBACModeLegacy)
	}); err != nil || !r.Converged {
		return err
	}
	// The row converges when every extension's condition says Legacy too.
	_, last, err := conds.waitCount(ctx, b.cfg.extensions, b.cfg.timeout)
	if err != nil {
		r.Converged, r.Error = false, "conditions: "+err.Error()
		return nil
	}
	b.logf("extensions: ClusterRoles after %.2fs, conditions after %.2fs", r.Seconds, last.Sub(t0).Seconds())
	r.RolesSeconds, r.Seconds = r.Seconds, max(r.Seconds, last.Sub(t0).Seconds())
	return nil
}

// undoExtensions switches every extension to Unmanaged, which removes
// oria's ClusterRoles, and waits until they are gone and every condition
// says Unmanaged.
func (b *bench) undoExtensions(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conds, err := observeConditions(ctx, b.watch.dyn, oriav1alpha1.TypeRBACManaged, metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
	if err != nil {
		return err
	}
	if err := b.setModes(ctx, oriav1alpha1.RBACModeUnmanaged); err != nil {
		return err
	}
	if _, _, err := conds.waitCount(ctx, b.cfg.extensions, b.cfg.timeout); err != nil {
		return fmt.Errorf("conditions: %w", err)
	}
	sel, err := labels.Parse(managedRoles)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(b.cfg.timeout)
	for {
		roles := &metav1.PartialObjectMetadataList{}
		roles.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleList"))
		err := b.admin.List(ctx, roles, client.MatchingLabelsSelector{Selector: sel}, client.Limit(1))
		switch {
		case err == nil && len(roles.Items) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("oria's ClusterRoles still there after %s (%v)", b.cfg.timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// cleanFloorExtensions deletes the floor's ClusterRoles and takes its
// annotation and condition off the ClusterExtensions again.
func (b *bench) cleanFloorExtensions(ctx context.Context) error {
	if err := b.admin.DeleteAllOf(ctx, &rbacv1.ClusterRole{}, client.HasLabels{labelFloor}); err != nil {
		return err
	}
	untrigger := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, annotationFloorTrigger))
	return parallel(ctx, setupWorkers, b.cfg.extensions, func(ctx context.Context, i int) error {
		name := extensionName(i)
		if _, err := b.dyn.Resource(clusterExtensionsGVR).Patch(ctx, name, types.MergePatchType, untrigger, metav1.PatchOptions{}); err != nil {
			return err
		}
		return applyFloorCondition(ctx, b.dyn, name, "", 0)
	})
}
