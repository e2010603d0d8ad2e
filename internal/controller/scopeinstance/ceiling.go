package scopeinstance

import (
	"context"
	"errors"
	"fmt"
	"maps"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/engine"
	"github.com/operator-framework/oria/internal/subjects"
)

// A ceiling holds for the life of a binding. An instance with a ceiling
// (spec.serviceAccount) writes its bindings as that ServiceAccount, so the API
// server's escalation check refuses what it could not grant; but that check
// runs only when a binding is written, against the rules its ClusterRole
// has then. Every such binding therefore records, in
// AnnotationCeilingRules, the hash of the rules the ServiceAccount allowed
// for (see package binding), and whenever what it grants changes the
// ServiceAccount decides again:
//
//   - an inline role whose rules the template changes: the ScopeTemplate
//     controller holds the new rules back until every binding of the role
//     records them (or is gone). Here the ServiceAccount is asked about the
//     new rules with SubjectAccessReviews (authz.Authorizer.CheckEachBind:
//     "bind", or every permission) before a binding of them is written or
//     its record moves; refused, the binding is deleted (it never holds the
//     new rules) and the instance reports Forbidden;
//   - a role the API server already grants as it is (a referenced role, or
//     an inline role in place): rewriting the record as the ServiceAccount
//     is itself the check, the API server's, against the role as it is
//     then; refused, the binding is deleted and the instance reports
//     Forbidden.
//
// A referenced ClusterRole (aggregated, edited by an admin) is not oria's
// to hold back: its new rules take effect at once through the bindings that
// exist. Its rules are read from the API server on every reconcile of an
// instance with a ceiling, and such an instance reconciles at least every
// recheck interval (DefaultRecheckInterval, 30 s), so a widened referenced
// role is granted through a binding the ceiling ServiceAccount no longer
// allows for at most one recheck interval (plus the reconcile). The same
// holds for an inline role of another template referenced by name.

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// ceiling is what a reconcile of an instance with a ceiling knows of what
// its bindings grant.
type ceiling struct {
	sa oriav1alpha1.ServiceAccountReference
	// values are the ceiling value each role's bindings must record.
	values map[string]string
	// ahead are the inline roles whose rules in the template differ from
	// the rules the role has now (held back by the ScopeTemplate
	// controller), with the template's rules: the API server would check
	// the rules the role has now, so the ServiceAccount is asked about
	// these first.
	ahead map[string][]rbacv1.PolicyRule
}

// newCeiling returns what an instance with the ceiling sa knows of what
// the roles of template t grant: an inline role the template's rules (and,
// when the role in place has other rules, the template's as ahead: inline,
// the roles as the cluster has them), another role what it grants now
// (values: its binding.CeilingHash, or binding.CeilingAbsent).
func newCeiling(sa oriav1alpha1.ServiceAccountReference, t *oriav1alpha1.ScopeTemplate, inline map[string]inlineRole, values map[string]string) *ceiling {
	c := &ceiling{sa: sa, values: map[string]string{}, ahead: map[string][]rbacv1.PolicyRule{}}
	for _, role := range binding.Roles(t) {
		if !role.Inline {
			c.values[role.Name] = values[role.Name]
			continue
		}
		c.values[role.Name] = binding.CeilingHash(role.Rules)
		if in := inline[role.Name]; in.state == roleReady && binding.CeilingHash(in.rules) != c.values[role.Name] {
			c.ahead[role.Name] = role.Rules
		}
	}
	return c
}

// annotate sets the ceiling records on the wanted bindings, and adds to
// the bindings to revoke those kept as they are whose record is not their
// role's.
func (c *ceiling) annotate(p *plan) {
	ann := binding.CeilingAnnotations(c.values)
	for _, b := range p.want.Objects() {
		b.SetAnnotations(ann[binding.RoleOf(b)])
	}
	covered := p.want.Keys()
	maps.Copy(covered, p.revoke.Keys())
	p.revoke = p.revoke.Plus(p.existing.BeyondCeiling(covered, c.values))
}

// identity is the ServiceAccount as the API server knows it when oria
// impersonates it.
func (c *ceiling) identity() subjects.Identity {
	return subjects.ServiceAccount(c.sa.Namespace, c.sa.Name)
}

// askCeiling asks the ServiceAccount whether it may grant the template's
// rules of the roles ahead where the wanted bindings of p grant them, for
// each binding not already recording them: a question, asked while
// gathering (no write depends on it). What it refuses leaves p.want for
// p.refused (a Forbidden outcome each), and the existing binding at its
// name goes to p.drop.
func (r *Reconciler) askCeiling(ctx context.Context, p *plan) error {
	c := p.ceiling
	existing := p.existing.ByKey()
	grants := ask(c, p.want, existing)
	if len(grants) == 0 {
		return nil
	}
	user := c.identity().UserInfo()
	// Every refusal is wanted (each decides a binding), not the first few.
	denials, err := r.Authz.CheckEachBind(ctx, user, grants, c.ahead)
	if err != nil {
		return fmt.Errorf("asking ServiceAccount %s/%s about the new rules of %d binding(s): %w", c.sa.Namespace, c.sa.Name, len(grants), err)
	}
	denied := make(map[binding.Grant]string, len(denials))
	for _, d := range denials {
		denied[d.Grant] = d.Message(user.Username) + " (the ScopeTemplate's new rules)"
	}
	p.want, p.refused, p.drop = split(p.want, existing, denied)
	return nil
}

// ask returns the grants of the wanted bindings of roles ahead that do
// not already record the role's new rules (existing: the instance's
// bindings by key).
func ask(c *ceiling, want binding.Set, existing map[types.NamespacedName]client.Object) (out []binding.Grant) {
	for _, b := range want.Objects() {
		role := binding.RoleOf(b)
		if _, ahead := c.ahead[role]; !ahead {
			continue
		}
		if cur, ok := existing[engine.Key(b)]; ok && binding.RoleOf(cur) == role && binding.Ceiling(cur) == c.values[role] {
			continue
		}
		out = append(out, binding.Grant{Role: role, Namespace: b.GetNamespace()})
	}
	return out
}

// split removes the refused grants from want: a Forbidden outcome each, and
// the existing binding at its name to delete.
func split(want binding.Set, existing map[types.NamespacedName]client.Object, denied map[binding.Grant]string) (keep binding.Set, refused []engine.Outcome, drop binding.Set) {
	var dropped []client.Object
	keep = want.Filter(func(b client.Object) bool {
		msg, no := denied[binding.Grant{Role: binding.RoleOf(b), Namespace: b.GetNamespace()}]
		if !no {
			return true
		}
		refused = append(refused, engine.Outcome{Namespace: b.GetNamespace(), Name: b.GetName(), Action: engine.Forbidden, Err: errors.New(msg)})
		if cur, ok := existing[engine.Key(b)]; ok {
			dropped = append(dropped, cur)
		}
		return false
	})
	return keep, refused, binding.SetOf(dropped...)
}

// refusedRewrites returns the existing bindings whose rewrite the
// ServiceAccount was refused (outcomes, in the order of want's Objects)
// while their record differed from the wanted one: the API server checked
// the role as it is now and the ServiceAccount may not grant it, so the
// binding goes (Write deletes it, as oria, right after the writes, with
// those askCeiling refused).
func refusedRewrites(outcomes []engine.Outcome, want, have binding.Set) binding.Set {
	var out []client.Object
	var existing map[types.NamespacedName]client.Object
	for i, b := range want.Objects() {
		if outcomes[i].Action != engine.Forbidden {
			continue
		}
		if existing == nil {
			existing = have.ByKey()
		}
		cur, ok := existing[engine.Key(b)]
		if ok && binding.RoleOf(cur) == binding.RoleOf(b) && binding.Ceiling(cur) != binding.Ceiling(b) {
			out = append(out, cur)
		}
	}
	return binding.SetOf(out...)
}
