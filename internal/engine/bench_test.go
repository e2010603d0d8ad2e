package engine_test

import (
	"context"
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/ownership"
)

// BenchmarkEnsureUnchanged is what every reconcile of a ScopeInstance bound
// in 2,000 namespaces pays when nothing changed, as when one more namespace
// appears (docs/benchmarks.md, new-namespace latency): the intended bindings,
// and the engine's comparison of each with the cache. No request is made.
func BenchmarkEnsureUnchanged(b *testing.B) {
	inst := &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "bench", UID: "0000-bench"}}
	subj := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "developers"}, {Kind: rbacv1.ServiceAccountKind, Name: "deployer"}}
	namespaces := make([]string, 2000)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("ns-%04d", i)
	}
	var cached []*rbacv1.RoleBinding
	for i, rb := range binding.RoleBindings(inst, "tmpl", []string{"view"}, subj, namespaces) {
		// As the cache holds them: decoded one by one, with what the
		// API server adds.
		c := rb.DeepCopy()
		c.UID = types.UID(fmt.Sprintf("uid-%d", i))
		c.ResourceVersion = "1"
		cached = append(cached, c)
	}
	ctx := context.Background()
	w := &engine.Writer{Memo: engine.NewMemo(), Engine: engine.New(engine.Unobserved)}
	b.ReportAllocs()
	for b.Loop() {
		want := binding.RoleBindings(inst, "tmpl", []string{"view"}, subj, namespaces)
		instanceOwns := ownership.InstanceOwner(inst.Name)
		owns := func(o client.Object) bool { return instanceOwns(o) }
		for _, o := range engine.Ensure(ctx, w, engine.RoleBindingKind, owns, want, engine.ByKey(cached)) {
			if o.Action != engine.Unchanged || o.Err != nil {
				b.Fatalf("%s/%s: %v %v", o.Namespace, o.Name, o.Action, o.Err)
			}
		}
	}
}
