package scopeinstance

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// AnnotationCeilingRules, the hash of the rules the ServiceAccount vouched
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
// vouches for for at most one recheck interval (plus the reconcile). The same
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

// ceilings reads what the roles of p's template grant, for an instance
// with a ceiling: inline roles from the template (and, from the cache, the
// rules they have now: p.inlineRules), other roles from the API server
// (not oria's cache, which holds only oria's roles).
func (r *Reconciler) ceilings(ctx context.Context, sa oriav1alpha1.ServiceAccountReference, p *bindPlan) (*ceiling, error) {
	c := &ceiling{sa: sa, values: map[string]string{}, ahead: map[string][]rbacv1.PolicyRule{}}
	for _, role := range binding.Roles(p.template) {
		if role.Inline {
			c.values[role.Name] = binding.CeilingHash(role.Rules)
			if now, ok := p.inlineRules[role.Name]; ok && binding.CeilingHash(now) != c.values[role.Name] {
				c.ahead[role.Name] = role.Rules
			}
			continue
		}
		cr := &rbacv1.ClusterRole{}
		switch err := r.APIReader.Get(ctx, types.NamespacedName{Name: role.Name}, cr); {
		case apierrors.IsNotFound(err):
			c.values[role.Name] = binding.CeilingAbsent
		case err != nil:
			return nil, fmt.Errorf("reading ClusterRole %q: %w", role.Name, err)
		default:
			c.values[role.Name] = binding.CeilingHash(cr.Rules)
		}
	}
	return c, nil
}

// annotate sets the ceiling records on the intended bindings, and adds to
// the stale bindings those kept as they are whose record is not their
// role's.
func (c *ceiling) annotate(p *bindPlan) {
	ann := binding.CeilingAnnotations(c.values)
	covered := map[types.NamespacedName]bool{}
	for _, b := range p.wantRBs {
		b.Annotations = ann[b.RoleRef.Name]
		covered[engine.Key(b)] = true
	}
	for _, b := range p.wantCRBs {
		b.Annotations = ann[b.RoleRef.Name]
		covered[engine.Key(b)] = true
	}
	for _, b := range p.staleRBs {
		covered[engine.Key(b)] = true
	}
	for _, b := range p.staleCRBs {
		covered[engine.Key(b)] = true
	}
	p.staleRBs = append(p.staleRBs, binding.Unvouched(p.existingRBs, covered, c.values, binding.RoleOfRoleBinding)...)
	p.staleCRBs = append(p.staleCRBs, binding.Unvouched(p.existingCRBs, covered, c.values, binding.RoleOfClusterRoleBinding)...)
}

// identity is the ServiceAccount as the API server knows it when oria
// impersonates it.
func (c *ceiling) identity() subjects.Identity {
	return subjects.ServiceAccount(c.sa.Namespace, c.sa.Name)
}

// vouched is the ServiceAccount's answer about the bindings of roles ahead
// of what they grant now.
type vouched struct {
	rbs  []*rbacv1.RoleBinding
	crbs []*rbacv1.ClusterRoleBinding
	// refusedRBs and refusedCRBs are the Forbidden outcomes of the
	// bindings it refused.
	refusedRBs, refusedCRBs []engine.Outcome
	// dropRBs and dropCRBs are existing bindings it refused: deleted.
	dropRBs  []*rbacv1.RoleBinding
	dropCRBs []*rbacv1.ClusterRoleBinding
}

// vouch asks the ServiceAccount whether it may grant the template's rules
// of the roles ahead where the intended bindings grant them, for each
// binding not already recording them, and returns the bindings to write.
func (r *Reconciler) vouch(ctx context.Context, c *ceiling, p *bindPlan, rbs map[types.NamespacedName]*rbacv1.RoleBinding, crbs map[types.NamespacedName]*rbacv1.ClusterRoleBinding) (vouched, error) {
	grants := append(ask(c, p.wantRBs, rbs, binding.RoleOfRoleBinding), ask(c, p.wantCRBs, crbs, binding.RoleOfClusterRoleBinding)...)
	v := vouched{rbs: p.wantRBs, crbs: p.wantCRBs}
	if len(grants) == 0 {
		return v, nil
	}
	user := c.identity().UserInfo()
	// Every refusal is wanted (each decides a binding), not the first few.
	denials, err := r.Authz.CheckEachBind(ctx, user, grants, c.ahead)
	if err != nil {
		return v, fmt.Errorf("asking ServiceAccount %s/%s about the new rules of %d binding(s): %w", c.sa.Namespace, c.sa.Name, len(grants), err)
	}
	denied := make(map[binding.Grant]string, len(denials))
	for _, d := range denials {
		denied[d.Grant] = d.Message(user.Username) + " (the ScopeTemplate's new rules)"
	}
	v.rbs, v.refusedRBs, v.dropRBs = split(p.wantRBs, rbs, denied, binding.RoleOfRoleBinding)
	v.crbs, v.refusedCRBs, v.dropCRBs = split(p.wantCRBs, crbs, denied, binding.RoleOfClusterRoleBinding)
	return v, nil
}

// ask returns the grants of the intended bindings of roles ahead that do
// not already record the role's new rules.
func ask[T client.Object](c *ceiling, want []T, existing map[types.NamespacedName]T, roleOf func(T) string) []binding.Grant {
	var out []binding.Grant
	for _, b := range want {
		role := roleOf(b)
		if _, ahead := c.ahead[role]; !ahead {
			continue
		}
		if cur, ok := existing[engine.Key(b)]; ok && roleOf(cur) == role && binding.Ceiling(cur) == c.values[role] {
			continue
		}
		out = append(out, binding.Grant{Role: role, Namespace: b.GetNamespace()})
	}
	return out
}

// split removes the refused grants from want: a Forbidden outcome each, and
// the existing binding at its name to delete.
func split[T client.Object](want []T, existing map[types.NamespacedName]T, denied map[binding.Grant]string, roleOf func(T) string) (keep []T, refused []engine.Outcome, drop []T) {
	for _, b := range want {
		msg, no := denied[binding.Grant{Role: roleOf(b), Namespace: b.GetNamespace()}]
		if !no {
			keep = append(keep, b)
			continue
		}
		refused = append(refused, engine.Outcome{Namespace: b.GetNamespace(), Name: b.GetName(), Action: engine.Forbidden, Err: errors.New(msg)})
		if cur, ok := existing[engine.Key(b)]; ok {
			drop = append(drop, cur)
		}
	}
	return keep, refused, drop
}

// refusedUnvouched returns the existing bindings whose rewrite the
// ServiceAccount was refused (outcomes, in want's order) while their record
// differed from the intended one: the API server checked the role as it is
// now and the ServiceAccount may not grant it, so the binding goes.
func refusedUnvouched[T client.Object](outcomes []engine.Outcome, want []T, existing map[types.NamespacedName]T, roleOf func(T) string) []T {
	var out []T
	for i, o := range outcomes {
		if o.Action != engine.Forbidden {
			continue
		}
		cur, ok := existing[engine.Key(want[i])]
		if ok && roleOf(cur) == roleOf(want[i]) && binding.Ceiling(cur) != binding.Ceiling(want[i]) {
			out = append(out, cur)
		}
	}
	return out
}

// revoke deletes, as oria, the existing bindings the ServiceAccount no
// longer vouches for: those vouch refused, and those whose rewrite it was
// refused (ensured: the outcomes of v's bindings). It runs before anything
// else is written, so that such a binding goes as soon as it is known.
func revoke(ctx context.Context, w *engine.Writer, v vouched, ensuredRBs, ensuredCRBs []engine.Outcome,
	rbs map[types.NamespacedName]*rbacv1.RoleBinding, crbs map[types.NamespacedName]*rbacv1.ClusterRoleBinding) (revokedRBs, revokedCRBs []engine.Outcome) {
	dropRBs := append(v.dropRBs, refusedUnvouched(ensuredRBs, v.rbs, rbs, binding.RoleOfRoleBinding)...)
	dropCRBs := append(v.dropCRBs, refusedUnvouched(ensuredCRBs, v.crbs, crbs, binding.RoleOfClusterRoleBinding)...)
	return engine.Delete(ctx, w, engine.RoleBindingKind.Name, dropRBs), engine.Delete(ctx, w, engine.ClusterRoleBindingKind.Name, dropCRBs)
}

// frozen returns the bindings of an instance with a ceiling that a spec
// error keeps from being written (existing bindings are kept as they
// are) whose recorded ceiling is not what their role grants, or is about
// to grant: the template's rules for its inline roles (the ScopeTemplate
// controller would otherwise hold them back for as long as the spec error
// lasts), the rules as they are for any other role. A role that does not
// exist grants nothing: its bindings stay (it is vouched for when created).
func (r *Reconciler) frozen(ctx context.Context, si *oriav1alpha1.ScopeInstance, rbs []*rbacv1.RoleBinding, crbs []*rbacv1.ClusterRoleBinding) ([]*rbacv1.RoleBinding, []*rbacv1.ClusterRoleBinding, error) {
	values := map[string]string{}
	t := &oriav1alpha1.ScopeTemplate{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: si.Spec.ScopeTemplateName}, t); {
	case err == nil && binding.ValidateTemplate(t) == nil:
		for _, role := range binding.Roles(t) {
			if role.Inline {
				values[role.Name] = binding.CeilingHash(role.Rules)
			}
		}
	case err != nil && !apierrors.IsNotFound(err):
		return nil, nil, fmt.Errorf("reading ScopeTemplate %q: %w", si.Spec.ScopeTemplateName, err)
	}
	unvouched := func(b client.Object, role string) (bool, error) {
		v, ok := values[role]
		if !ok {
			cr := &rbacv1.ClusterRole{}
			switch err := r.APIReader.Get(ctx, types.NamespacedName{Name: role}, cr); {
			case apierrors.IsNotFound(err):
				v = binding.CeilingAbsent
			case err != nil:
				return false, fmt.Errorf("reading ClusterRole %q: %w", role, err)
			default:
				v = binding.CeilingHash(cr.Rules)
			}
			values[role] = v
		}
		return v != binding.CeilingAbsent && binding.Ceiling(b) != v, nil
	}
	var outRBs []*rbacv1.RoleBinding
	var outCRBs []*rbacv1.ClusterRoleBinding
	for _, b := range rbs {
		if no, err := unvouched(b, binding.RoleOfRoleBinding(b)); err != nil || no {
			if err != nil {
				return nil, nil, err
			}
			outRBs = append(outRBs, b)
		}
	}
	for _, b := range crbs {
		if no, err := unvouched(b, binding.RoleOfClusterRoleBinding(b)); err != nil || no {
			if err != nil {
				return nil, nil, err
			}
			outCRBs = append(outCRBs, b)
		}
	}
	return outRBs, outCRBs, nil
}

// revokeFrozen deletes, as oria, the bindings an instance with a spec error
// may no longer keep (frozenPlan).
func (r *Reconciler) revokeFrozen(ctx context.Context, si *oriav1alpha1.ScopeInstance, p *revokePlan) result {
	// The gate is narrowed first (gate.go), never created.
	var gate []engine.Outcome
	if p.gate != nil && p.gate.cur != nil {
		gate = r.writeGate(ctx, si, p.gate)
	}
	if len(p.rbs)+len(p.crbs) == 0 {
		return result{summary: engine.Summarize(gate)}
	}
	rbs, crbs := r.revokeAll(ctx, p)
	r.recordEvents(si, nil, nil, rbs, crbs, nil)
	return result{summary: engine.Summarize(gate, rbs, crbs), revoked: len(rbs) + len(crbs)}
}
