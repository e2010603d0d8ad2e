package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
)

// change is what a write changes, as far as the guard is concerned.
type change struct {
	// grants: a create, a spec change, or a change of who owns spec fields
	// (server-side apply): the spec is checked for the requester.
	grants bool
	// spec: a create, or a change of the spec itself. Only then is the spec
	// checked for errors (SpecErrors): an object stored invalid before that
	// check existed still takes any other update, a finalizer's removal
	// included.
	spec bool
	// authority lists changes of ownership metadata (ownership.AuthorityChanges).
	authority []string
	// compiledFrom names the RBACPolicy the object (before the change, or
	// after it) is compiled from.
	compiledFrom string
	// changed is set when anything but the fields the API server keeps
	// changed.
	changed bool
}

func (c change) needsCheck() bool {
	return c.grants || len(c.authority) > 0 || (c.compiledFrom != "" && c.changed)
}

// classify compares old (nil on create) with obj.
func classify(old, obj client.Object) change {
	c := change{authority: ownership.AuthorityChanges(old, obj), compiledFrom: ownership.CompiledFrom(obj)}
	if old == nil {
		c.grants, c.spec, c.changed = true, true, true
		return c
	}
	if from := ownership.CompiledFrom(old); from != "" {
		c.compiledFrom = from
	}
	c.spec = !equality.Semantic.DeepEqual(specOf(old), specOf(obj))
	c.grants = c.spec ||
		!equality.Semantic.DeepEqual(specOwners(old.GetManagedFields()), specOwners(obj.GetManagedFields()))
	c.changed = c.grants || !equality.Semantic.DeepEqual(userMeta(old), userMeta(obj))
	if c.grants && RevokesOnly(old, obj) {
		// A window narrowed, nothing else: a revocation, admitted for
		// everyone, whatever else is wrong with the object.
		c.grants, c.spec = false, false
	}
	return c
}

// specOf returns the spec of one of oria's kinds.
func specOf(obj client.Object) any {
	switch o := obj.(type) {
	case *oriav1alpha1.ScopeTemplate:
		return o.Spec
	case *oriav1alpha1.ScopeInstance:
		return o.Spec
	case *oriav1alpha1.RBACPolicy:
		return o.Spec
	}
	return nil
}

// userMeta is the metadata a user writes, less what the API server keeps
// (resourceVersion, generation, managedFields): the part of an update that
// tells whether anything changed at all.
func userMeta(obj client.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(),
		OwnerReferences: obj.GetOwnerReferences(), Finalizers: obj.GetFinalizers(),
	}
}

// specOwners maps each field manager (with its operation) to the spec
// fields it owns, canonically encoded: a server-side apply that repeats
// someone else's spec under another manager changes nothing in the spec,
// but makes that manager a co-owner of the grant. The spec fields named in
// drop (as "f:<field>") are left out, and so is a manager that owns no
// other spec field.
func specOwners(entries []metav1.ManagedFieldsEntry, drop ...string) map[string]string {
	out := map[string]string{}
	for _, e := range entries {
		if e.FieldsV1 == nil || e.Subresource != "" {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			out[e.Manager+"/"+string(e.Operation)] = string(e.FieldsV1.Raw)
			continue
		}
		spec, ok := fields["f:spec"]
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal(spec, &v) != nil {
			out[e.Manager+"/"+string(e.Operation)] = string(spec)
			continue
		}
		if m, ok := v.(map[string]any); ok && len(drop) > 0 {
			for _, f := range drop {
				delete(m, f)
			}
			if len(m) == 0 {
				continue
			}
		}
		canonical, _ := json.Marshal(v) // map keys sorted
		out[e.Manager+"/"+string(e.Operation)] = string(canonical)
	}
	return out
}

// checkMetadata refuses, for a restricted user, what oria's controllers
// would otherwise take as authority the guard never checked:
//
//   - any change to the objects compiled from an RBACPolicy (those are
//     exactly what the policy says; change the policy), except dropping
//     finalizers and the references to a policy that is gone or being
//     deleted, which is what the garbage collector does;
//   - setting, changing or removing oria's ownership labels, setting a
//     controller reference to one of oria's kinds, or adding a finalizer,
//     on any of oria's kinds.
func (g *Guard) checkMetadata(ctx context.Context, user authenticationv1.UserInfo, kind string, c change, old, obj client.Object) ([]string, error) {
	if c.compiledFrom != "" && c.changed {
		if old != nil && !c.grants {
			released, err := g.releasesGonePolicies(ctx, old, obj)
			if err != nil || released {
				return nil, err
			}
		}
		return []string{fmt.Sprintf("user %q may not write %s %q: it is compiled from RBACPolicy %q, and only oria and cluster admins (who may bind and escalate every ClusterRole) may change compiled objects; change the RBACPolicy instead",
			user.Username, kind, obj.GetName(), c.compiledFrom)}, nil
	}
	if len(c.authority) == 0 {
		return nil, nil
	}
	return []string{fmt.Sprintf("user %q may not change who owns %s %q (it %s): oria decides ownership from this metadata, so only oria and cluster admins (who may bind and escalate every ClusterRole) may set it",
		user.Username, kind, obj.GetName(), strings.Join(c.authority, ", "))}, nil
}

// releasesGonePolicies reports whether obj differs from old (with the same
// spec and spec owners) only by dropped finalizers and dropped references to RBACPolicies that are gone
// or being deleted.
func (g *Guard) releasesGonePolicies(ctx context.Context, old, obj client.Object) (bool, error) {
	removed, ok := ownership.Releases(old, obj)
	if !ok {
		return false, nil
	}
	for _, ref := range removed {
		if ref.Kind != ownership.KindRBACPolicy {
			continue
		}
		p := &oriav1alpha1.RBACPolicy{}
		err := g.reader.Get(ctx, client.ObjectKey{Name: ref.Name}, p)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("reading RBACPolicy %q: %w", ref.Name, err)
		case p.UID == ref.UID && p.DeletionTimestamp.IsZero():
			return false, nil
		}
	}
	return true, nil
}
