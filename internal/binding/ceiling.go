package binding

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// The ceiling of a binding (of a ScopeInstance with a
// serviceAccount): a ServiceAccount allows a binding (its ceiling) when it is
// written, for the rules its ClusterRole has then. Each such binding
// records the hash of those rules in AnnotationCeilingRules; a binding
// whose recorded hash differs from the hash of what its role grants (or
// will grant) has not been allowed by the ceiling and must be asked about again.
//
// The annotation is a record, not a secret: whoever can write it on a
// binding passes the API server's escalation check for that binding's role
// as it is, so could equally have bound that role themselves, and such a
// binding of their own follows the role wherever it goes too. For the rules
// a role has, forging the record gives nobody more than they could already
// give. Not so for rules an inline role does not have yet (ahead of it: the
// ScopeTemplate controller holds them back until every binding records
// them): a namespace admin who writes the new rules' value on a binding in
// their namespace spares that binding the ServiceAccount's question about
// them, so the binding grants the new rules there once the template's
// writer's change takes effect, though the ceiling would not have allowed
// them. This is open (docs/development.md, "What oria reads, and who can
// write it", AnnotationCeilingRules): a record only oria can write (a MAC
// under a key only oria reads) would close it.

// CeilingAbsent is the ceiling value for a binding of a ClusterRole that
// does not exist: it grants nothing, and anything the role grants once it
// is created must be allowed by the ceiling.
const CeilingAbsent = "absent"

// CeilingHash returns the ceiling value of a binding of a role with rules:
// "sha256:" and the full hex SHA-256 of the rules' JSON (a full digest, not
// a short names.Hash: a second set of rules with the same short hash could
// otherwise be found and pass as allowed). No rules hash as an empty
// list.
func CeilingHash(rules []rbacv1.PolicyRule) string {
	if len(rules) == 0 {
		rules = []rbacv1.PolicyRule{}
	}
	b, err := json.Marshal(rules)
	if err != nil {
		// A PolicyRule is strings and slices of strings: it always
		// marshals. Never allow something that did not hash.
		return "unhashable"
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Ceiling returns the ceiling value recorded on a binding, "" if none.
func Ceiling(o client.Object) string {
	return o.GetAnnotations()[oriav1alpha1.AnnotationCeilingRules]
}

// CeilingAnnotations returns, for each role of ceilings (role name →
// ceiling value), the annotations of its bindings; nil when ceilings is nil
// (an instance without a serviceAccount: its bindings carry none). One map
// per role, shared by its bindings in every namespace: read-only.
func CeilingAnnotations(ceilings map[string]string) map[string]map[string]string {
	if ceilings == nil {
		return nil
	}
	out := make(map[string]map[string]string, len(ceilings))
	for role, v := range ceilings {
		out[role] = map[string]string{oriav1alpha1.AnnotationCeilingRules: v}
	}
	return out
}

// BeyondCeiling returns the bindings of existing that covered does not hold
// (by namespace/name) and whose recorded ceiling is not ceilings[role] for
// the role they bind (by roleOf). covered holds the bindings a reconcile
// writes or deletes anyway; the others are kept as they are (bindings of an
// inline role not created yet, bindings in a terminating namespace), and
// one kept without the ServiceAccount having allowed its role as it is
// must go instead.
func BeyondCeiling[T client.Object](existing []T, covered map[types.NamespacedName]bool, ceilings map[string]string, roleOf func(T) string) []T {
	var out []T
	for _, b := range existing {
		if !covered[key(b)] && Ceiling(b) != ceilings[roleOf(b)] {
			out = append(out, b)
		}
	}
	return out
}
