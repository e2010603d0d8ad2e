package extension_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/olm"
	"github.com/operator-framework/oria/internal/testutil"
)

// adopt does to the ClusterRole name what operator-controller's Helm does
// when the extension's bundle starts shipping a role under that name and
// finds oria's (which carries Helm's adoption metadata): it adopts it with
// a patch that only adds (the release's owner labels, and rules when the
// bundle's differ), as Helm's three-way patch of an adopted object does.
func adopt(t *testing.T, ext, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cr := getRole(c, name)
		before := cr.DeepCopy()
		for k, v := range olm.OwnerLabels(ext) {
			cr.Labels[k] = v
		}
		if rules != nil {
			cr.Rules = rules
		}
		require.NoError(c, k8sClient.Patch(context.Background(), cr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}),
			client.FieldOwner("helm")))
	}, testutil.Timeout, testutil.Interval)
}

// TestAdoptedRole: a role oria generated carries Helm's adoption metadata
// for the extension's release; when the bundle adopts it, oria hands it
// over without deleting or rewriting it: the bundle's rules stay (equal to
// oria's or not), oria's labels and annotation go, its field manager keeps
// only the Legacy aggregation label, which never goes missing, and then
// both sides are quiet.
func TestAdoptedRole(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := installed(t, legacy, crd)
	generated := waitRoles(t, ce, legacy, []string{crd})
	view, edit := names.ExtensionRole(crd, names.RoleView), names.ExtensionRole(crd, names.RoleEdit)
	for _, cr := range generated {
		assert.Equal(t, oriav1alpha1.ManagedByHelm, cr.Labels[oriav1alpha1.LabelManagedBy], cr.Name)
		assert.Equal(t, ce.Name, cr.Annotations[oriav1alpha1.AnnotationHelmReleaseName], cr.Name)
		assert.Equal(t, ce.Spec.Namespace, cr.Annotations[oriav1alpha1.AnnotationHelmReleaseNamespace], cr.Name)
	}

	// Watch the aggregation label of the view role while it changes hands.
	var lapses atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			cr := &rbacv1.ClusterRole{}
			if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: view}, cr); err != nil || cr.Labels[oriav1alpha1.LabelAggregateToView] != "true" {
				lapses.Add(1)
			}
		}
	}()

	// The bundle's view role is what oria generated; its edit role is
	// narrower.
	narrower := []rbacv1.PolicyRule{{APIGroups: []string{generated[edit].Rules[0].APIGroups[0]}, Resources: []string{"foos"}, Verbs: []string{"update"}}}
	adopt(t, ce.Name, view, nil)
	adopt(t, ce.Name, edit, narrower)

	waitRoles(t, ce, legacy, []string{crd}, view, edit)
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy, "bundle", view, edit)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for name, agg := range map[string]string{view: oriav1alpha1.LabelAggregateToView, edit: oriav1alpha1.LabelAggregateToEdit} {
			cr := getRole(c, name)
			assert.Equal(c, generated[name].UID, cr.UID, "%s: handed over in place, never deleted", name)
			assert.Equal(c, "true", cr.Labels[agg], name)
			for _, k := range []string{oriav1alpha1.LabelManaged, oriav1alpha1.LabelExtension, oriav1alpha1.LabelRole} {
				assert.NotContains(c, cr.Labels, k, name)
			}
			assert.NotContains(c, cr.Annotations, oriav1alpha1.AnnotationCRD, name)
			assert.Equal(c, []string{`Apply {"f:metadata":{"f:labels":{"f:` + agg + `":{}}}}`}, oriaFields(cr), name)
		}
		assert.Equal(c, generated[view].Rules, getRole(c, view).Rules, "the bundle's rules, equal to oria's, stay")
		assert.Equal(c, narrower, getRole(c, edit).Rules, "the bundle's rules stay")
	}, testutil.Timeout, testutil.Interval)
	close(stop)
	<-done
	assert.Zero(t, lapses.Load(), "the view role lost its aggregation label while changing hands")
	testutil.EventuallyEvents(t, k8sClient, "ClusterExtension", ce.Name, extension.EventHandedOver)
	assertQuiet(t, e, ce.Name)

	// FineGrained: the aggregation label oria held goes with it.
	setMode(t, ce.Name, fineGrained)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cr := getRole(c, view)
		assert.NotContains(c, cr.Labels, oriav1alpha1.LabelAggregateToView)
		assert.Empty(c, oriaFields(cr))
		assert.Equal(c, generated[view].Rules, cr.Rules)
	}, testutil.Timeout, testutil.Interval)
	waitRoles(t, ce, fineGrained, []string{crd}, view, edit)
	assertQuiet(t, e, ce.Name)
}
