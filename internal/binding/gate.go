package binding

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/ownership"
)

// Gates. A time-bound grant over many namespaces (Gated) binds, in each of
// its namespaces, one ClusterRole of its own, its gate, instead of each of
// its template's roles. The gate holds the rules of those roles while the
// window is open and none outside it, so that each instant of the window
// is one write, whatever the number of namespaces: the gate's bindings are
// made while the grant is pending (they grant nothing), the gate is filled
// at notBefore, and emptied at expiresAt before its bindings and then the
// gate itself are deleted. Deleting a thousand bindings one by one takes
// the API server longer than the second a time-bound grant is allowed
// (docs/benchmarks.md, expiry).
//
// The gate is a copy, kept in step with the roles it stands for: a role
// narrowed, widened, deleted or created is copied as soon as oria sees it,
// as the aggregation controller copies the roles aggregated into the
// built-in ones. It never carries an aggregation label or rule.

// SmallGrant is the most namespaces an instance lists and still counts as
// a small grant rather than a fan-out (FanOut).
const SmallGrant = 16

// FanOut reports whether an instance binds over many namespaces: it
// selects its namespaces, or lists more than SmallGrant.
func FanOut(spec oriav1alpha1.ScopeInstanceSpec) bool {
	return spec.NamespaceSelector != nil || len(spec.Namespaces) > SmallGrant
}

// Gated reports whether an instance binds a gate (see above): a time-bound
// fan-out without a ceiling. A small grant starts and ends within the
// second binding by binding; a cluster-wide one has a binding per role;
// an instance with a ceiling binds as its ServiceAccount, which must hold
// every role it binds (a gate's rules would be copied by oria).
func Gated(spec oriav1alpha1.ScopeInstanceSpec) bool {
	return InstanceWindow(spec).Bounded() && FanOut(spec) && !IsClusterWide(spec) && spec.ServiceAccount == nil
}

// gatePrefix starts the name of every gate.
const gatePrefix = "oria-window-"

// GateName returns the name of the gate of the instance with this name and
// UID: an instance deleted and created again has another gate.
func GateName(instance string, uid string) string {
	return names.Join(strings.TrimSuffix(gatePrefix, "-"), instance, names.Hash(uid))
}

// IsGateName reports whether a ClusterRole name is a gate's name, or could
// become one: oria fills and empties gates on its own, so no template may
// name one (ValidateTemplate). A gate is empty while its grant is pending,
// so anyone "holds" its permissions then; judged by what it can come to
// grant, it grants whatever the grant it stands for grants, to that
// grant's subjects alone.
func IsGateName(name string) bool { return strings.HasPrefix(name, gatePrefix) }

// GateSource is a role a gate stands for, with the rules it grants now.
type GateSource struct {
	Name  string
	Rules []rbacv1.PolicyRule
}

// GateSources returns the roles a gate of an instance of template t stands
// for (roles: those it binds), with the rules each grants now: an inline
// role's from the template (the rules the guard checked, whether or not the
// ScopeTemplate controller has written them yet), another's from live (as
// the cluster has it: none when it does not exist, as a binding of it would
// grant nothing either). The controller and kubectl oria plan share it.
func GateSources(t *oriav1alpha1.ScopeTemplate, roles []string, live func(name string) ([]rbacv1.PolicyRule, error)) ([]GateSource, error) {
	inline := map[string][]rbacv1.PolicyRule{}
	for _, role := range Roles(t) {
		if role.Inline {
			inline[role.Name] = role.Rules
		}
	}
	out := make([]GateSource, 0, len(roles))
	for _, name := range roles {
		rules, ok := inline[name]
		if !ok {
			var err error
			if rules, err = live(name); err != nil {
				return nil, err
			}
		}
		out = append(out, GateSource{Name: name, Rules: rules})
	}
	return out, nil
}

// GateRole returns the gate of inst standing for sources (sorted by name),
// holding their rules when open and none otherwise. Its first rule is its
// seal (ownership.GateSeal), then each source's rules in turn, without
// repeats; an empty gate holds its seal alone.
func GateRole(inst *oriav1alpha1.ScopeInstance, sources []GateSource, open bool) *rbacv1.ClusterRole {
	sources = slices.SortedFunc(slices.Values(sources), func(a, b GateSource) int { return strings.Compare(a.Name, b.Name) })
	roleNames := make([]string, len(sources))
	name := GateName(inst.Name, string(inst.UID))
	rules := []rbacv1.PolicyRule{ownership.GateSeal(name)}
	for i, s := range sources {
		roleNames[i] = s.Name
		if !open {
			continue
		}
		for _, rule := range s.Rules {
			if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, rule) }) {
				rules = append(rules, *rule.DeepCopy())
			}
		}
	}
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Labels:          ownership.GateLabels(inst.Name),
			Annotations:     map[string]string{oriav1alpha1.AnnotationGateRoles: strings.Join(roleNames, ",")},
			OwnerReferences: []metav1.OwnerReference{ownership.Ref(ownership.KindScopeInstance, inst.Name, inst.UID)},
			Finalizers:      []string{metav1.FinalizerDeleteDependents},
		},
		Rules: rules,
	}
}

// A gate's name stays held while any binding names it, whoever deletes its
// instance, oria running or not. oria deletes a gate only after its
// bindings; the garbage collector, when the instance is deleted while no
// oria runs, deletes the gate and the bindings (its dependents) in any
// order, and a ClusterRole created under the gate's name before the last
// binding goes would grant its rules to the bindings' subjects (issue 38,
// case 5). So a gate carries the foregroundDeletion finalizer from its
// creation, and each of its bindings an owner reference to it that blocks
// its deletion (HoldGate): the collector deletes an object whose owners
// are gone with the propagation its finalizers ask for, so the gate is
// deleted in the foreground, and stays (terminating, its name held) until
// no binding that blocks it is left; then the collector removes the
// finalizer. oria, which deletes the bindings first, removes the finalizer
// itself when it deletes a gate (engine.Delete), so that no gate waits for
// a collector that may not run.

// GateHold returns the owner reference by which a binding of the gate with
// this name and UID blocks the gate's deletion.
func GateHold(gate string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         rbacv1.SchemeGroupVersion.String(),
		Kind:               "ClusterRole",
		Name:               gate,
		UID:                uid,
		BlockOwnerDeletion: ptr.To(true),
	}
}

// HoldGate adds hold (GateHold) to the owner references of the bindings
// that name its gate, after their controller reference. The bindings of
// one instance share one owner slice (RoleBindings): so do the held ones.
func HoldGate(rbs []*rbacv1.RoleBinding, hold metav1.OwnerReference) {
	var shared []metav1.OwnerReference
	for _, rb := range rbs {
		if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != hold.Name || len(rb.OwnerReferences) != 1 {
			continue
		}
		if shared == nil || shared[0].UID != rb.OwnerReferences[0].UID {
			shared = []metav1.OwnerReference{rb.OwnerReferences[0], hold}
		}
		rb.OwnerReferences = shared
	}
}

// NarrowGate returns want holding only the rules of want that cur already
// holds, and its seal: the gate of a grant that no checked template backs
// (a spec error) may lose rules, never gain one.
func NarrowGate(want, cur *rbacv1.ClusterRole) *rbacv1.ClusterRole {
	kept := []rbacv1.PolicyRule{ownership.GateSeal(want.Name)}
	for _, rule := range want.Rules {
		if equality.Semantic.DeepEqual(rule, kept[0]) {
			continue
		}
		if slices.ContainsFunc(cur.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, rule) }) {
			kept = append(kept, rule)
		}
	}
	want.Rules = kept
	return want
}

// GateRoles returns the roles a gate stands for (its annotation), sorted.
func GateRoles(gate *rbacv1.ClusterRole) []string {
	v := gate.Annotations[oriav1alpha1.AnnotationGateRoles]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// HoldGate adds hold to the bindings of s that name its gate (see
// HoldGate): a gate is bound in namespaces, by RoleBindings.
func (s Set) HoldGate(hold metav1.OwnerReference) { HoldGate(s.RoleBindings, hold) }

// EmptiedGate returns gate emptied: its seal (ownership.GateSeal) its only
// rule, without an aggregationRule, the rest as it is (a gate being
// deleted keeps its finalizer: its name stays held until no binding names
// it). Its bindings then grant nothing, at once, before they and the gate
// are deleted. It is nil when gate is nil or already empty.
func EmptiedGate(gate *rbacv1.ClusterRole) *rbacv1.ClusterRole {
	if gate == nil {
		return nil
	}
	sealed := []rbacv1.PolicyRule{ownership.GateSeal(gate.Name)}
	if equality.Semantic.DeepEqual(gate.Rules, sealed) && gate.AggregationRule == nil {
		return nil
	}
	empty := gate.DeepCopy()
	empty.Rules, empty.AggregationRule = sealed, nil
	return empty
}

// EmptiedGates returns the gates that are not empty, and each emptied
// (EmptiedGate), in order.
func EmptiedGates(gates []*rbacv1.ClusterRole) (cur, emptied []*rbacv1.ClusterRole) {
	for _, g := range gates {
		if e := EmptiedGate(g); e != nil {
			cur, emptied = append(cur, g), append(emptied, e)
		}
	}
	return cur, emptied
}
