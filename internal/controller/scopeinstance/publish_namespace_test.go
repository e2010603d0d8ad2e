package scopeinstance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestPublicationIntoMissingNamespace: a publication whose ConfigMap's
// namespace does not exist yet is a reason of its own naming the field
// (not a ReconcileError retried with backoff), and the list is published
// within seconds of the namespace appearing.
func TestPublicationIntoMissingNamespace(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	a := namespace(t, "pubns", nil)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: "view"}}, testutil.User("alice"))
	create(t, tmpl)
	op := testutil.UniqueName("op-later")
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, []string{a}, nil)
	si.Spec.Publication = &oriav1alpha1.Publication{ConfigMap: oriav1alpha1.ConfigMapKeyReference{Namespace: op, Name: "watch"}}
	create(t, si)
	got := eventuallyReady(t, si.Name, metav1.ConditionFalse, oriav1alpha1.ReasonPublicationNamespaceNotFound)
	_, cond := ready(t, got.Name)
	assert.Contains(t, cond.Message, `namespace "`+op+`" (spec.publication.configMap.namespace) does not exist`)
	eventuallyBoundIn(t, si.Name, "view", a)

	start := time.Now()
	create(t, testutil.Namespace(op, nil))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		require.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Namespace: op, Name: "watch"}, cm))
		assert.Equal(c, op+","+a, cm.Data["namespaces"])
	}, 10*time.Second, testutil.Interval)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)
	t.Logf("published %s after the namespace was created", time.Since(start).Round(time.Millisecond))
}
