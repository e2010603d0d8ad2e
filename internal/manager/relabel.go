package manager

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/engine"
)

// Relabel is a start-up task for clusters where an earlier oria ran: it
// marked what it created with app.kubernetes.io/managed-by=oria only, and
// oria's caches now filter on oriav1alpha1.LabelManaged. A binding such an
// oria made would be invisible to its controller, which could then never
// revoke it. Relabel adds LabelManaged to every RBAC object that carries
// the old mark and lacks the new one (a merge patch: nothing else changes);
// the controllers then see them, as any object of theirs, and repair,
// keep or delete each. It runs on the leader, once, and retries until it
// has gone through every object.
type Relabel struct {
	// Reader lists from the API server (the caches cannot see these
	// objects).
	Reader client.Reader
	Writer *engine.Writer
	Log    logr.Logger
	// Retry is the pause after a failed pass (30 s when 0).
	Retry time.Duration
}

// AddRelabel adds the Relabel task to mgr.
func AddRelabel(mgr ctrl.Manager, w *engine.Writer) error {
	return mgr.Add(&Relabel{Reader: mgr.GetAPIReader(), Writer: w, Log: ctrl.Log.WithName("relabel")})
}

// NeedLeaderElection: the leader's controllers are the ones that must see
// the objects.
func (r *Relabel) NeedLeaderElection() bool { return true }

// Start relabels until done or ctx ends.
func (r *Relabel) Start(ctx context.Context) error {
	for {
		n, err := r.Pass(ctx)
		if err == nil {
			if n > 0 {
				r.Log.Info("labelled objects an earlier oria created", "label", oriav1alpha1.LabelManaged, "count", n)
			}
			return nil
		}
		r.Log.Error(err, "labelling objects an earlier oria created; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cmp.Or(r.Retry, 30*time.Second)):
		}
	}
}

// Pass labels every object that needs it once and returns how many it
// labelled.
func (r *Relabel) Pass(ctx context.Context) (int, error) {
	sel, err := legacySelector()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, kind := range []string{"ClusterRoleList", "ClusterRoleBindingList", "RoleBindingList"} {
		opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}, client.Limit(500)}
		for cont := ""; ; {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind))
			if err := r.Reader.List(ctx, list, append(opts, client.Continue(cont))...); err != nil {
				return n, fmt.Errorf("listing %s: %w", kind, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				obj.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind[:len(kind)-len("List")]))
				if err := engine.AddLabel(ctx, r.Writer, obj, oriav1alpha1.LabelManaged, oriav1alpha1.ManagedValue); err != nil {
					return n, fmt.Errorf("labelling %s %s: %w", obj.Kind, client.ObjectKeyFromObject(obj), err)
				}
				n++
			}
			if cont = list.Continue; cont == "" {
				break
			}
		}
	}
	return n, nil
}

// legacySelector selects what an earlier oria created and oria does not
// see: app.kubernetes.io/managed-by=oria without LabelManaged.
func legacySelector() (labels.Selector, error) {
	by, err := labels.NewRequirement(oriav1alpha1.LabelManagedBy, selection.Equals, []string{oriav1alpha1.ManagedByValue})
	if err != nil {
		return nil, err
	}
	missing, err := labels.NewRequirement(oriav1alpha1.LabelManaged, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*by, *missing), nil
}
