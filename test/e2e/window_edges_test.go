package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	policymodel "github.com/operator-framework/oria/internal/policy"
	"github.com/operator-framework/oria/internal/testutil"
)

// Time exact at every edge (issue 40): each instant at the edge of what oria
// accepts, written as a user would (the raw string), on a ScopeInstance and
// on an RBACPolicy, by an admin and by a delegated user, is either refused at
// admission naming its field, or stored, read back as the instant it is
// applied as (whole seconds, notBefore rounded up, expiresAt down) and
// honoured exactly, checked by SubjectAccessReview.

// windowEdge is one case: the raw notBefore and expiresAt ("" for none),
// and the field a refusal names ("" when the window is stored), or, when
// stored, the instants it is applied as.
type windowEdge struct {
	name          string
	nb, exp       string
	refusedField  string
	appliedNB     *time.Time
	appliedExp    *time.Time
	endsDuringRun bool
}

// windowEdges are the cases, around now.
func windowEdges(now time.Time) []windowEdge {
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }
	past, later, soon := now.Add(-time.Hour).Truncate(time.Second), now.Add(time.Hour).Truncate(time.Second), now.Add(15*time.Second).Truncate(time.Second)
	pastUp := past.Add(time.Second)
	epoch, last := oriav1alpha1.EarliestInstant, oriav1alpha1.LatestInstant
	tomorrow := now.UTC().AddDate(0, 0, 1).Format("2006-01-02")
	return []windowEdge{
		{name: "the zero time", exp: "0001-01-01T00:00:00Z", refusedField: "spec.expiresAt"},
		{name: "year 0 with a positive offset (year -1 in UTC)", nb: "0000-01-01T00:00:00+01:00", refusedField: "spec.notBefore"},
		{name: "0001", nb: "0001-06-01T12:00:00Z", refusedField: "spec.notBefore"},
		{name: "1969", exp: "1969-12-31T23:59:59Z", refusedField: "spec.expiresAt"},
		{name: "9999 with a negative offset (year 10000 in UTC)", exp: "9999-12-31T23:59:59-01:00", refusedField: "spec.expiresAt"},
		{name: "a single-digit hour", nb: tomorrow + "T1:00:00Z", refusedField: "spec.notBefore"},
		{name: "a sub-second window", nb: stamp(later) + ".200Z", exp: stamp(later) + ".800Z", refusedField: "spec.expiresAt"},
		{name: "a window inverted once rounded", nb: stamp(later) + ".900Z", exp: stamp(later.Add(time.Second)) + ".100Z", refusedField: "spec.expiresAt"},
		{name: "a comma for the fraction", nb: stamp(past) + ",5Z", exp: stamp(soon) + ",7Z", appliedNB: &pastUp, appliedExp: &soon, endsDuringRun: true},
		{name: "the first and the last instants accepted", nb: "1970-01-01T00:00:00Z", exp: "9999-12-31T23:59:59Z", appliedNB: &epoch, appliedExp: &last},
	}
}

// TestWindowEdges: see windowEdges.
func TestWindowEdges(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	d, own, asD := sequenceUser(t, "edges")
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeLegacy)
	plural, group, ext := crd.Spec.Names.Plural, crd.Spec.Group, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	// D holds the extension's roles in their namespace (Legacy: aggregated
	// into admin), so D may grant them there.
	eventuallyAccess(t, true, testutil.Access{User: d, Verb: "delete", Group: group, Resource: plural, Namespace: own})

	type stored struct {
		edge   windowEdge
		kind   string
		name   string
		access testutil.Access
	}
	var kept []stored
	actors := []struct {
		name string
		c    client.Client
	}{{"admin", k8sClient}, {"delegated user " + d, asD}}
	for i, e := range windowEdges(time.Now()) {
		for _, kind := range []string{"ScopeInstance", "RBACPolicy"} {
			for _, actor := range actors {
				subject := testutil.UniqueName(fmt.Sprintf("edge%d", i))
				obj, access := edgeObject(t, kind, own, ext, group, plural, subject, e)
				err := actor.c.Create(ctx, obj)
				what := fmt.Sprintf("%s, %s as %s (notBefore %q, expiresAt %q)", e.name, kind, actor.name, e.nb, e.exp)
				if e.refusedField != "" {
					require.Error(t, err, "%s: admitted", what)
					assert.True(t, apierrors.IsInvalid(err), "%s: refused as invalid for everyone: %v", what, err)
					assert.Contains(t, err.Error(), e.refusedField+": Invalid value", what)
					if actor.c == asD && kind == "RBACPolicy" {
						t.Logf("%s: %v", what, err) // one refusal per case, in full
					}
					continue
				}
				require.NoError(t, err, what)
				cleanup(t, obj)
				kept = append(kept, stored{edge: e, kind: kind, name: obj.GetName(), access: access})
			}
		}
	}

	// Stored: the raw strings as written, read back by oria's types as the
	// instants applied, the compiled instance carrying exactly those.
	for _, s := range kept {
		raw := &unstructured.Unstructured{}
		raw.SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind(s.kind))
		require.NoError(t, k8sClient.Get(ctx, types.NamespacedName{Name: s.name}, raw))
		nb, _, _ := unstructured.NestedString(raw.Object, "spec", "notBefore")
		exp, _, _ := unstructured.NestedString(raw.Object, "spec", "expiresAt")
		assert.Equal(t, []string{s.edge.nb, s.edge.exp}, []string{nb, exp}, "%s %s: stored as written", s.kind, s.edge.name)
		var window []*metav1.Time
		if s.kind == "RBACPolicy" {
			p := &oriav1alpha1.RBACPolicy{}
			require.NoError(t, k8sClient.Get(ctx, types.NamespacedName{Name: s.name}, p))
			window = append(window, p.Spec.NotBefore, p.Spec.ExpiresAt)
			si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: policymodel.ObjectName(s.name)}}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(si), si))
			}, testutil.Timeout, testutil.Interval)
			window = append(window, si.Spec.NotBefore, si.Spec.ExpiresAt)
		} else {
			si := &oriav1alpha1.ScopeInstance{}
			require.NoError(t, k8sClient.Get(ctx, types.NamespacedName{Name: s.name}, si))
			window = append(window, si.Spec.NotBefore, si.Spec.ExpiresAt)
		}
		for i, b := range window {
			want := s.edge.appliedNB
			if i%2 == 1 {
				want = s.edge.appliedExp
			}
			if assert.NotNil(t, b, "%s %s: a bound read as no bound", s.kind, s.edge.name) {
				assert.True(t, b.Equal(&metav1.Time{Time: *want}), "%s %s: bound %d read back as %s, applied as %s", s.kind, s.edge.name, i, b.UTC(), want.UTC())
			}
		}
	}

	// Honoured: each stored window is open now, and the one ending during
	// the run ends at its expiresAt as applied (rounded down), not later.
	var all, ending []testutil.Access
	var end time.Time
	for _, s := range kept {
		all = append(all, s.access)
		if s.edge.endsDuringRun {
			ending, end = append(ending, s.access), *s.edge.appliedExp
		}
	}
	waitAllowed(t, true, all...)
	require.True(t, time.Now().Before(end), "the test was too slow to see the comma's window open")
	revoked := waitAllowed(t, false, ending...)
	t.Logf("%d grants ending at %s (a comma's fraction, rounded down): access ended %s after it", len(ending), end.Format(time.RFC3339),
		revoked.Sub(end).Round(time.Millisecond))
	assert.False(t, revoked.Before(end), "ended before its expiresAt")
	assert.Less(t, revoked.Sub(end), windowJitter)
}

// edgeObject returns the object of an edge case, as unstructured with the
// raw strings, granting subject view in ns, and the access it grants.
func edgeObject(t *testing.T, kind, ns, ext, group, plural, subject string, e windowEdge) (*unstructured.Unstructured, testutil.Access) {
	t.Helper()
	name := testutil.UniqueName("edge")
	user := map[string]any{"kind": rbacv1.UserKind, "apiGroup": rbacv1.GroupName, "name": subject}
	spec := map[string]any{}
	access := testutil.Access{User: subject, Verb: "list", Resource: "pods", Namespace: ns}
	if kind == "ScopeInstance" {
		tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User(subject))
		require.NoError(t, k8sClient.Create(context.Background(), tmpl))
		cleanup(t, tmpl)
		spec["scopeTemplateName"], spec["namespaces"] = tmpl.Name, []any{ns}
	} else {
		spec["extensionName"], spec["access"], spec["namespaces"] = ext, string(oriav1alpha1.AccessView), []any{ns}
		spec["subjects"] = []any{user}
		spec["apis"] = []any{map[string]any{"group": group, "resource": plural}}
		access = testutil.Access{User: subject, Verb: "list", Group: group, Resource: plural, Namespace: ns}
	}
	if e.nb != "" {
		spec["notBefore"] = e.nb
	}
	if e.exp != "" {
		spec["expiresAt"] = e.exp
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind(kind))
	u.SetName(name)
	return u, access
}

// TestYearOnePatchRefused: the patch of issue 40, a delegated user setting
// an admin's two-hour policy's expiresAt to the zero time (which once
// compiled to no end at all, and passed the guard as an earlier end), is
// refused naming spec.expiresAt; the grant keeps its two hours.
func TestYearOnePatchRefused(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	_, own, asD := sequenceUser(t, "yearone")
	crd := extensionWithAPI(t, oriav1alpha1.RBACModeFineGrained)
	plural, group, ext := crd.Spec.Names.Plural, crd.Spec.Group, crd.Labels[oriav1alpha1.LabelOLMOwnerName]
	user := testutil.UniqueName("two-hours")
	p := adminPolicy(t, group, plural, ext, oriav1alpha1.AccessView, user, own)
	end := wholeSecondsFromNow(2 * time.Hour)
	testutil.Update(t, k8sClient, p, func() { p.Spec.ExpiresAt = end })
	list := testutil.Access{User: user, Verb: "list", Group: group, Resource: plural, Namespace: own}
	waitAllowed(t, true, list)

	err := asD.Patch(ctx, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"expiresAt":"0001-01-01T00:00:00Z"}}`)))
	require.Error(t, err, "the year-1 patch must be refused")
	t.Log(err)
	assert.True(t, apierrors.IsInvalid(err), "refused for everyone: %v", err)
	assert.True(t, strings.Contains(err.Error(), "spec.expiresAt: Invalid value"), "names the field: %v", err)

	got := &oriav1alpha1.RBACPolicy{}
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got))
	require.NotNil(t, got.Spec.ExpiresAt)
	assert.True(t, got.Spec.ExpiresAt.Equal(end), "the admin's end stands: %s", got.Spec.ExpiresAt)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si := &oriav1alpha1.ScopeInstance{}
		require.NoError(c, k8sClient.Get(ctx, types.NamespacedName{Name: policymodel.ObjectName(p.Name)}, si))
		require.NotNil(c, si.Spec.ExpiresAt, "the compiled grant keeps an end")
		assert.True(c, si.Spec.ExpiresAt.Equal(end))
	}, testutil.Timeout, testutil.Interval)
	assert.True(t, can(t, list), "the grant is in force until its end")
}
