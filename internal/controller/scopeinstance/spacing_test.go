package scopeinstance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/controller/scopeinstance"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestStatusWritesAreSpaced: namespaces created one after the other, each
// as soon as the previous one's binding exists, get their bindings at once,
// while the instance's status, which lists them, is written at most about
// once per DefaultStatusSpacing instead of once per namespace; it ends
// listing every one of them.
func TestStatusWritesAreSpaced(t *testing.T) {
	testutil.NeedCluster(t)
	ctx := context.Background()
	team := testutil.UniqueName("team")
	first := namespace(t, "spaced", map[string]string{"team": team})
	view := podReader(t)
	tmpl := testutil.ScopeTemplate(testutil.UniqueName("tmpl"), []oriav1alpha1.ClusterRoleTemplate{{Name: view}}, testutil.User("alice"))
	create(t, tmpl)
	si := newInstance(testutil.UniqueName("si"), tmpl.Name, nil, matchLabels("team", team))
	create(t, si)
	eventuallyReady(t, si.Name, metav1.ConditionTrue, oriav1alpha1.ReasonBound)

	// Count the status versions the API server stores from here on.
	wc, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	require.NoError(t, err)
	w, err := wc.Watch(ctx, &oriav1alpha1.ScopeInstanceList{}, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", si.Name)})
	require.NoError(t, err)
	defer w.Stop()
	statuses := make(chan oriav1alpha1.ScopeInstanceStatus, 100)
	go func() {
		defer close(statuses)
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(*oriav1alpha1.ScopeInstance); ok && ev.Type == watch.Modified {
				statuses <- o.Status
			}
		}
	}()

	const more = 10
	want := []string{first}
	start := time.Now()
	for i := range more {
		ns := namespace(t, fmt.Sprintf("spaced-%d", i), map[string]string{"team": team})
		want = append(want, ns)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NoError(c, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: binding.BindingName(si.Name, view)}, &rbacv1.RoleBinding{}))
		}, testutil.Timeout, 10*time.Millisecond, "the binding of namespace %d is made at once", i)
	}
	elapsed := time.Since(start)

	// Every namespace is listed in the end; count the distinct statuses
	// written until then.
	writes := 0
	var last oriav1alpha1.ScopeInstanceStatus
	deadline := time.After(testutil.Timeout)
	for !assert.ObjectsAreEqual(sorted(want), sorted(last.BoundNamespaces)) {
		select {
		case st, ok := <-statuses:
			require.True(t, ok, "the watch ended")
			if !equality.Semantic.DeepEqual(st, last) {
				writes++
				last = st
			}
		case <-deadline:
			t.Fatalf("the status lists %v, want %v", last.BoundNamespaces, want)
		}
	}
	assert.EqualValues(t, len(want), last.BoundNamespaceCount)
	bound := 2 + int(elapsed/scopeinstance.DefaultStatusSpacing)
	assert.LessOrEqual(t, writes, bound, "%d namespaces in %s: at most %d status writes, one per %s (and the first at once)",
		more, elapsed.Round(time.Millisecond), bound, scopeinstance.DefaultStatusSpacing)
	t.Logf("%d namespaces bound in %s with %d status writes", more, elapsed.Round(time.Millisecond), writes)
}
