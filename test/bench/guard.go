package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// The guard scenario (issue 21): the escalation guard's own admission
// latency, for a delegated user, against the same writes with the guard off.
const (
	// guardName names the scenario's objects (prefix of the namespaces).
	guardName = "bench-guard"
	// guardUser is the delegated user: create/update/patch on oria's kinds,
	// admin (RoleBinding) in the scenario's namespaces, not cluster-admin.
	guardUser = "bench-guard-delegate"
	// guardGroup is the subject the template and the policy bind.
	guardGroup = "bench-guard-devs"
	// guardExtension provides guardAPIs APIs in FineGrained mode.
	guardExtension = "bench-guard-ext"
	guardAPIs      = 5
	// labelGuard marks the scenario's cluster-scoped setup objects;
	// labelGuardSlot its namespaces: "a" on the first, "b" on the last,
	// "none" on the others (the policy's selector switches between a and b).
	labelGuard     = "bench.oria.operatorframework.io/guard"
	labelGuardSlot = "bench.oria.operatorframework.io/guard-slot"
	// guardWarmup writes are made, untimed, before each timed series.
	guardWarmup = 3
	// guardPause separates two writes, so that oria's reaction to one
	// (a few RoleBindings) lands between them, with the guard on or off.
	guardPause = 100 * time.Millisecond
)

// guardNamespaces returns the scenario's n+1 namespaces: the ScopeInstance
// lists n of them, the first n or the last n by turns.
func guardNamespaces(n int) []string {
	out := make([]string, n+1)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", guardName, i)
	}
	return out
}

// guardSlot is the value of labelGuardSlot on the i-th of n+1 namespaces.
func guardSlot(i, n int) string {
	switch i {
	case 0:
		return "a"
	case n:
		return "b"
	}
	return "none"
}

// guardPatches are the two spec changes a series alternates between (each
// a JSON merge patch): for the ScopeInstance, its list of namespaces, the
// first n or the last n of ns; for the RBACPolicy, its selector, the
// namespace labelled a or b. Every write changes the spec, so the guard
// checks each one in full.
func guardPatches(ns []string) (instance, policy [2][]byte, err error) {
	n := len(ns) - 1
	for i, list := range [2][]string{ns[:n], ns[1:]} {
		if instance[i], err = jsonPatch(map[string]any{"spec": map[string]any{"namespaces": list}}); err != nil {
			return
		}
		slot := []string{"a", "b"}[i]
		if policy[i], err = jsonPatch(map[string]any{"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]string{labelGuardSlot: slot}},
		}}); err != nil {
			return
		}
	}
	return
}

// guardRoles are the generated roles the RBACPolicy binds (access view:
// -view and -view-crdview of each API), which the delegated user is given
// cluster-wide: a policy over a selector is checked cluster-wide.
func guardRoles(crds []string) []string {
	var out []string
	for _, crd := range crds {
		out = append(out, names.ExtensionRole(crd, names.RoleView), names.ExtensionRole(crd, names.RoleViewCRDView))
	}
	return out
}

// guardCRDs are the extension's CRDs, in creation order.
func guardCRDs() []*apiextensionsv1.CustomResourceDefinition {
	out := make([]*apiextensionsv1.CustomResourceDefinition, guardAPIs)
	for i := range out {
		out[i] = testutil.CRD("guard.bench.oria.example.com", fmt.Sprintf("gadget%ds", i), fmt.Sprintf("Gadget%d", i), guardExtension)
	}
	return out
}

// guard is the escalation guard's row: a delegated user's writes of
//   - a ScopeInstance listing guardNamespaces namespaces, of a template that
//     binds the built-in view and edit (the user is admin in each), and
//   - an RBACPolicy (view on an extension's APIs, FineGrained) over a
//     namespace selector, which the guard checks cluster-wide (the user holds
//     the generated -view and -view-crdview roles cluster-wide),
//
// each -guard-writes times with the guard on, then the same writes by the
// same user with the guard off (its ValidatingWebhookConfiguration deleted,
// and created again afterwards). Each write is a spec update (a merge patch
// that switches between two spec values), timed client-side from the
// request to its response.
func (b *bench) guard(ctx context.Context) (retErr error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := b.cfg.guardNamespaces
	rows := map[string]*Result{}
	for _, name := range []string{scenarioGuardInstance, scenarioGuardInstance + guardOffSuffix, scenarioGuardPolicy, scenarioGuardPolicy + guardOffSuffix} {
		rows[name] = &Result{Name: name, Objects: b.cfg.guardWrites}
		b.report.Results = append(b.report.Results, rows[name])
	}
	as, err := b.impersonate(guardUser)
	if err != nil {
		return err
	}
	restoreRoles, err := b.aggregateBuiltinRoles(ctx)
	if err != nil {
		return err
	}
	defer func() {
		retErr = errors.Join(retErr, b.cleanGuard(context.WithoutCancel(ctx), n, restoreRoles))
	}()
	si, p, err := b.setupGuard(ctx, as, n)
	if err != nil {
		return err
	}
	instancePatches, policyPatches, err := guardPatches(guardNamespaces(n))
	if err != nil {
		return err
	}
	series := []struct {
		row     string
		obj     client.Object
		patches [2][]byte
	}{
		{scenarioGuardInstance, si, instancePatches},
		{scenarioGuardPolicy, p, policyPatches},
	}
	// Guard on (as installed), then off.
	for _, s := range series {
		if err := b.guardSeries(ctx, rows[s.row], as, s.obj, s.patches); err != nil {
			return err
		}
	}
	saved, err := b.setGuardOff(ctx, as, si)
	if err != nil {
		return err
	}
	defer func() {
		retErr = errors.Join(retErr, b.setGuardOn(context.WithoutCancel(ctx), as, si, saved))
	}()
	for _, s := range series {
		if err := b.guardSeries(ctx, rows[s.row+guardOffSuffix], as, s.obj, s.patches); err != nil {
			return err
		}
	}
	return nil
}

// guardOffSuffix names the rows measured with the guard off.
const guardOffSuffix = "-off"

// impersonate returns a client acting as user (the API server adds
// system:authenticated), not rate limited.
func (b *bench) impersonate(user string) (client.Client, error) {
	cfg := rest.CopyConfig(b.restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return client.New(cfg, client.Options{Scheme: b.admin.Scheme()})
}

// guardSeries times -guard-writes spec updates of obj by the user (after
// guardWarmup untimed ones), switching between the two patches, into r.
func (b *bench) guardSeries(ctx context.Context, r *Result, as client.Client, obj client.Object, patches [2][]byte) error {
	if err := b.settle(ctx, "before "+r.Name); err != nil {
		return err
	}
	b.logf("%s: %d writes of %T %s as %s (after %d untimed)", r.Name, b.cfg.guardWrites, obj, obj.GetName(), guardUser, guardWarmup)
	s, err := b.begin(ctx, r.Name)
	if err != nil {
		return err
	}
	// The object was created with patches[0]'s value: start with the other.
	var lat []time.Duration
	state := 0 // which patch's value the object holds
	for i := range guardWarmup + b.cfg.guardWrites {
		target := obj.DeepCopyObject().(client.Object)
		t0 := time.Now()
		err := as.Patch(ctx, target, client.RawPatch(types.MergePatchType, patches[(i+1)%2]))
		d := time.Since(t0)
		if err != nil {
			// A refused write ends the series: each can take the guard's
			// whole check timeout.
			r.Error = fmt.Sprintf("write %d of %d failed after %s: %s", i+1, guardWarmup+b.cfg.guardWrites, d.Round(time.Millisecond), shorten(err.Error(), 400))
			b.logf("%s: %s", r.Name, r.Error)
			break
		}
		state = (i + 1) % 2
		if i >= guardWarmup {
			lat = append(lat, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(guardPause):
		}
	}
	// Leave the object as it was created (as admin, untimed), so that the
	// next series starts from the same spec.
	if state != 0 {
		if err := b.admin.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, patches[0])); err != nil {
			return fmt.Errorf("restoring the spec of %s: %w", obj.GetName(), err)
		}
	}
	r.Converged = len(lat) == b.cfg.guardWrites
	r.Latency = newLatency(lat)
	b.logf("%s: %d writes, p50 %s, p99 %s, max %s", r.Name, r.Latency.Count, fmtSeconds(r.Latency.P50), fmtSeconds(r.Latency.P99), fmtSeconds(r.Latency.Max))
	if err := b.waitQuiet(ctx, "after "+r.Name); err != nil {
		return err
	}
	return b.end(ctx, s, r)
}

// guardActive reports whether the guard refuses a write the user may not
// make (a dry run: nothing is stored): the instance listing a namespace
// where the user holds nothing. The API server sees a change of its
// webhook configurations through a watch, shortly after it is made.
func guardActive(ctx context.Context, as client.Client, si *oriav1alpha1.ScopeInstance) (bool, error) {
	patch, err := jsonPatch(map[string]any{"spec": map[string]any{"namespaces": []string{metav1.NamespaceDefault}}})
	if err != nil {
		return false, err
	}
	err = as.Patch(ctx, si.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.DryRunAll)
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "escalation-guard"):
		return true, nil
	default:
		return false, fmt.Errorf("probing the guard: %w", err)
	}
}

// waitGuard waits until the guard is active (or not).
func (b *bench) waitGuard(ctx context.Context, as client.Client, si *oriav1alpha1.ScopeInstance, active bool) error {
	t0 := time.Now()
	for {
		on, err := guardActive(ctx, as, si)
		if err != nil {
			return err
		}
		if on == active {
			b.logf("guard: %s after %s", map[bool]string{true: "on", false: "off"}[active], time.Since(t0).Round(time.Millisecond))
			return nil
		}
		if time.Since(t0) > b.cfg.timeout {
			return fmt.Errorf("the guard is not %s after %s", map[bool]string{true: "on", false: "off"}[active], b.cfg.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// setGuardOff deletes the guard's ValidatingWebhookConfiguration and
// returns it, to be created again by setGuardOn.
func (b *bench) setGuardOff(ctx context.Context, as client.Client, si *oriav1alpha1.ScopeInstance) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := b.admin.Get(ctx, client.ObjectKey{Name: localcluster.WebhookConfigurationName}, hook); err != nil {
		return nil, fmt.Errorf("reading the guard's webhook configuration: %w", err)
	}
	b.logf("guard: deleting ValidatingWebhookConfiguration %s", hook.Name)
	if err := b.admin.Delete(ctx, hook); err != nil {
		return nil, err
	}
	saved := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: hook.Name, Labels: hook.Labels, Annotations: hook.Annotations},
		Webhooks:   hook.Webhooks,
	}
	return saved, b.waitGuard(ctx, as, si, false)
}

// setGuardOn creates the guard's webhook configuration again.
func (b *bench) setGuardOn(ctx context.Context, as client.Client, si *oriav1alpha1.ScopeInstance, saved *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	b.logf("guard: creating ValidatingWebhookConfiguration %s again", saved.Name)
	if err := b.admin.Create(ctx, saved.DeepCopy()); err != nil {
		return fmt.Errorf("restoring the guard's webhook configuration: %w", err)
	}
	return b.waitGuard(ctx, as, si, true)
}

// builtinAggregated are the built-in ClusterRoles whose rules
// kube-controller-manager's aggregation controller fills, in the order
// they aggregate into each other (view is labelled to aggregate into edit,
// edit into admin).
var builtinAggregated = []string{"view", "edit", "admin"}

func jsonPatch(v any) ([]byte, error) { return json.Marshal(v) }

// shorten cuts s to at most n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + " [...]"
}
