package extension_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestModeSwitchCost: switching an extension to Legacy costs one create per
// new role and one Event for all the roles. The scale benchmark
// (docs/benchmarks.md) showed that an Event per role (4,000 for a
// 200-extension switch) was the largest part of the API server's work.
func TestModeSwitchCost(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	g := group()
	crds := []string{"foos." + g, "bars." + g, "bazs." + g}
	ce := newExtension(t, "Bogus") // the running controller leaves it alone
	for _, crd := range crds {
		addCRD(t, ce.Name, crd)
	}
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidMode)
	waitCacheSynced(t, e, ce.Name)

	ceNow := getCE(t, ce.Name)
	ceNow.Annotations[oriav1alpha1.AnnotationRBACMode] = string(legacy)
	c, writes := testutil.CountingClient(modeOverride{Client: e.mgr.GetClient(), ce: ceNow})
	rec := events.NewFakeRecorder(100)
	d := e.deps
	d.Client, d.Recorder, d.Memo = c, rec, engine.NewMemo()
	r, err := extension.New(d, extension.Options{DefaultMode: unmanaged})
	require.NoError(t, err)
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ce.Name}})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, name := range roleNames(crds) {
			_ = k8sClient.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})

	roles := len(crds) * len(names.RoleKinds)
	assert.Equal(t, int64(roles+1), writes.Total(), "want one create per role and one status write: %s", writes)
	for _, name := range roleNames(crds) {
		getRole(t, name)
	}
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		if strings.Contains(ev, " "+extension.EventRoleCreated+" ") {
			got = append(got, ev)
		}
	}
	require.Len(t, got, 1, "one Event for all the roles: %v", got)
	assert.Contains(t, got[0], "Normal "+extension.EventRoleCreated+" Created 12 ClusterRole(s): bars.")
	assert.Contains(t, got[0], "and 2 more")
}
