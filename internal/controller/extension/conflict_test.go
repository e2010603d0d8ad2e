package extension_test

import (
	"context"
	"testing"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/controller/extension"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestConflict: a same-name role oria did not create is never touched; it is
// named in a Conflict condition and the other roles are still generated.
// When it goes away, oria generates its own.
func TestConflict(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged, ConflictRecheckInterval: 200 * time.Millisecond})
	ctx := context.Background()
	crd := "foos." + group()

	foreignName := names.ExtensionRole(crd, names.RoleView)
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: foreignName, Labels: map[string]string{"team": "platform"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}
	testutil.Create(t, k8sClient, foreign)

	// A role oria generated for another extension (same name: the other
	// extension provided this CRD before). The other extension's mode is
	// invalid, so oria leaves its roles as they are (otherwise it would
	// delete this one at once, as the other extension no longer has the
	// CRD).
	otherExt := newExtension(t, "Bogus")
	otherName := names.ExtensionRole(crd, names.RoleEdit)
	other := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: otherName, Labels: map[string]string{
			oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue, oriav1alpha1.LabelExtension: otherExt.Name,
		}, Annotations: map[string]string{oriav1alpha1.AnnotationCRD: crd},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: ocv1.GroupVersion.String(), Kind: "ClusterExtension",
				Name: otherExt.Name, UID: otherExt.UID, Controller: new(true)}}},
	}
	testutil.Create(t, k8sClient, other)
	foreign, other = getRole(t, foreignName), getRole(t, otherName)

	ce := installed(t, legacy, crd)
	waitRoles(t, ce, legacy, []string{crd}, foreignName, otherName)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonConflict,
		`ClusterRole "`+foreignName+`" exists and was not created by oria`, `ClusterRole "`+otherName+`"`, otherExt.Name)
	assert.Equal(t, foreign.ResourceVersion, getRole(t, foreignName).ResourceVersion, "conflicting role modified")
	assert.Equal(t, other.ResourceVersion, getRole(t, otherName).ResourceVersion, "other extension's role modified")
	testutil.EventuallyEvents(t, k8sClient, "ClusterExtension", ce.Name, extension.EventConflict)
	assertQuiet(t, e, ce.Name)

	// The admin resolves the conflicts: oria generates its own roles.
	require.NoError(t, k8sClient.Delete(ctx, foreign))
	require.NoError(t, k8sClient.Delete(ctx, other))
	waitRoles(t, ce, legacy, []string{crd})
	waitCondition(t, ce.Name, metav1.ConditionTrue, oriav1alpha1.ReasonLegacy)
}

// staleReader answers NotFound for every ClusterRole, like a read that
// happened just before someone created the role.
type staleReader struct{ client.Reader }

func (r staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*rbacv1.ClusterRole); ok {
		return apierrors.NewNotFound(rbacv1.Resource("clusterroles"), key.Name)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestCreateNeverTakesOver: a role that appears between oria's read and its
// write (a bundle role being installed, say) makes the write fail; it is not
// taken over, and the next reconcile classifies it correctly.
func TestCreateNeverTakesOver(t *testing.T) {
	testutil.NeedCluster(t)
	e := startManager(t, extension.Options{DefaultMode: unmanaged})
	crd := "foos." + group()
	ce := newExtension(t, "Bogus") // the running controller leaves it alone
	addCRD(t, ce.Name, crd)
	foreignName := names.ExtensionRole(crd, names.RoleView)
	foreign := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: foreignName, Labels: map[string]string{"team": "platform"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}
	testutil.Create(t, k8sClient, foreign)
	waitCondition(t, ce.Name, metav1.ConditionFalse, oriav1alpha1.ReasonInvalidMode)

	ceNow := getCE(t, ce.Name)
	ceNow.Annotations[oriav1alpha1.AnnotationRBACMode] = string(legacy)
	// A client whose cache shows the extension in Legacy mode: only this
	// Reconciler acts on it.
	d := e.deps
	d.Client, d.APIReader, d.Recorder, d.Memo = modeOverride{Client: e.mgr.GetClient(), ce: ceNow}, staleReader{e.mgr.GetAPIReader()}, events.NewFakeRecorder(100), engine.NewMemo()
	r, err := extension.New(d, extension.Options{DefaultMode: unmanaged})
	require.NoError(t, err)
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ce.Name}})
	require.Error(t, err)
	assert.True(t, apierrors.IsAlreadyExists(err), "want AlreadyExists, got %v", err)
	got := getRole(t, foreignName)
	assert.Equal(t, foreign.ResourceVersion, got.ResourceVersion, "foreign role modified")
	assert.Equal(t, map[string]string{"team": "platform"}, got.Labels)
}

// modeOverride returns ce for Gets of that ClusterExtension and does not
// write status (so the running controller's view stays as it is).
type modeOverride struct {
	client.Client
	ce *ocv1.ClusterExtension
}

func (m modeOverride) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if ce, ok := obj.(*ocv1.ClusterExtension); ok && key.Name == m.ce.Name {
		m.ce.DeepCopyInto(ce)
		return nil
	}
	return m.Client.Get(ctx, key, obj, opts...)
}

func (m modeOverride) Status() client.SubResourceWriter { return noStatus{} }

type noStatus struct{ client.SubResourceWriter }

func (noStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return nil
}
