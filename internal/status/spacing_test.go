package status

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

func TestSpacing(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSpacing(time.Second)
	s.Now = func() time.Time { return now }

	assert.Zero(t, s.Wait("a", true), "never written: now")
	s.Wrote("a")
	now = now.Add(300 * time.Millisecond)
	assert.Equal(t, 700*time.Millisecond, s.Wait("a", true), "routine: waits out the period")
	assert.Zero(t, s.Wait("a", false), "anything else: now")
	assert.Zero(t, s.Wait("b", true), "per object")
	now = now.Add(700 * time.Millisecond)
	assert.Zero(t, s.Wait("a", true), "due")

	s.Wrote("a")
	s.Forget("a")
	assert.Zero(t, s.Wait("a", true), "forgotten: now")

	var none *Spacing
	assert.Zero(t, none.Wait("a", true), "a nil Spacing holds nothing back")
	none.Wrote("a")
	none.Forget("a")
}

// TestPatchSpaced: a routine change is written, the next one within the
// period held back (no request) and written once due; any other change is
// written at once; an unchanged status is never written.
func TestPatchSpaced(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	require.NoError(t, oriav1alpha1.AddToScheme(scheme))
	si := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "si"}}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(si).WithStatusSubresource(si).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	now := time.Unix(1000, 0)
	s := NewSpacing(time.Second)
	s.Now = func() time.Time { return now }
	of := func(o *oriav1alpha1.ScopeInstance) any { return o.Status }
	// Routine here: only the count changed.
	routine := func(before, after *oriav1alpha1.ScopeInstance) bool {
		return before.Status.Scope == after.Status.Scope
	}
	step := func(change func(*oriav1alpha1.ScopeInstance)) time.Duration {
		t.Helper()
		before := &oriav1alpha1.ScopeInstance{}
		require.NoError(t, c.Get(ctx, types.NamespacedName{Name: "si"}, before))
		after := before.DeepCopy()
		change(after)
		wait, err := PatchSpaced(ctx, c, s, before, after, of, routine)
		require.NoError(t, err)
		return wait
	}
	count := func(n int32) func(*oriav1alpha1.ScopeInstance) {
		return func(o *oriav1alpha1.ScopeInstance) { o.Status.BoundNamespaceCount = n }
	}

	assert.Zero(t, step(count(1)))
	assert.Equal(t, 1, patches, "first routine change: written")
	now = now.Add(400 * time.Millisecond)
	assert.Equal(t, 600*time.Millisecond, step(count(2)))
	assert.Equal(t, 1, patches, "second within the period: held back")
	assert.Zero(t, step(func(o *oriav1alpha1.ScopeInstance) { o.Status.Scope = oriav1alpha1.ScopeCluster }))
	assert.Equal(t, 2, patches, "not routine: written at once")
	assert.Zero(t, step(func(*oriav1alpha1.ScopeInstance) {}))
	assert.Equal(t, 2, patches, "unchanged: nothing")
	now = now.Add(time.Second)
	assert.Zero(t, step(count(2)))
	assert.Equal(t, 3, patches, "due: written")
	got := &oriav1alpha1.ScopeInstance{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Name: "si"}, got))
	assert.Equal(t, int32(2), got.Status.BoundNamespaceCount)
}
