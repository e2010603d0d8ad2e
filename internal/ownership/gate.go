package ownership

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// GateSeal is the rule every gate holds, filled or empty: "hold" on a
// non-resource URL no server serves. It grants nothing (a RoleBinding
// grants no non-resource URL; a ClusterRoleBinding of a gate is refused
// at admission and would grant a URL that does not exist), and it is held
// only by those who hold every non-resource URL, cluster admins.
// Kubernetes lets anyone bind a ClusterRole whose every permission they
// hold where they bind it; without the seal a gate that is empty (its
// grant pending, or expired) is held by everyone, so a namespace admin
// could bind it with a plain RoleBinding in their namespace, and gain what
// the grant grants when oria fills it (issue 38: found by the sequence
// fuzzer, seeds 2387 and 226).
func GateSeal(gate string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{"hold"}, NonResourceURLs: []string{sealPrefix + gate}}
}

const sealPrefix = "/oria.operatorframework.io/gates/"

// IsGateSeal reports whether r is a gate's seal (any gate's: a planned
// gate's name is not known until its instance exists).
func IsGateSeal(r rbacv1.PolicyRule) bool {
	return len(r.NonResourceURLs) == 1 && strings.HasPrefix(r.NonResourceURLs[0], sealPrefix) &&
		equality.Semantic.DeepEqual(r, GateSeal(strings.TrimPrefix(r.NonResourceURLs[0], sealPrefix)))
}

// GateGrants reports whether a gate holds a rule other than a seal:
// whether its bindings grant something.
func GateGrants(gate *rbacv1.ClusterRole) bool {
	return slices.ContainsFunc(gate.Rules, func(r rbacv1.PolicyRule) bool { return !IsGateSeal(r) })
}
