// Package names derives the names and label values of the objects oria
// generates. Every function is deterministic: the same inputs give the same
// name on every reconcile and in every replica, which is what makes
// server-side apply idempotent and lets oria find its objects again.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// MaxObjectName is the longest name oria gives an object (the DNS
	// subdomain limit; RBAC object names accept more, but other tools and
	// humans rarely expect it).
	MaxObjectName = validation.DNS1123SubdomainMaxLength
	// hashLen is the number of hex characters of a hash suffix.
	hashLen = 10
)

// Hash returns a short, stable hex digest of parts. Parts are separated by a
// byte that cannot occur in Kubernetes names so that ("a-b","c") and
// ("a","b-c") differ.
func Hash(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLen]
}

// Shorten returns name unchanged when it fits in max characters; otherwise it
// keeps as much of the front as fits and appends "-" and a hash of the full
// name, so that distinct long names stay distinct and readable.
func Shorten(name string, max int) string {
	if len(name) <= max {
		return name
	}
	keep := max - hashLen - 1
	if keep < 0 {
		keep = 0
	}
	prefix := strings.TrimRight(name[:keep], "-.")
	return prefix + "-" + Hash(name)
}

// Join joins parts with "-" and shortens the result to MaxObjectName.
func Join(parts ...string) string {
	return Shorten(strings.Join(parts, "-"), MaxObjectName)
}

// LabelValue returns s when it is a valid label value, otherwise a value that
// is: a readable prefix of s plus a hash of all of s. Object names can be up to
// 253 characters but label values only 63, so labels that point at an owner
// by name go through this function and are matched the same way.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	keep := validation.LabelValueMaxLength - hashLen - 1
	if keep > len(s) {
		keep = len(s)
	}
	prefix := s[:keep]
	// A label value must start and end with an alphanumeric character and
	// contain only [-_.a-zA-Z0-9]; drop anything else from the prefix.
	prefix = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return -1
	}, prefix)
	prefix = strings.TrimRight(strings.TrimLeft(prefix, "-_."), "-_.")
	if prefix == "" {
		return Hash(s)
	}
	return prefix + "-" + Hash(s)
}

// RoleKind is one of the four ClusterRoles oria generates for every API of
// an extension. Its value is the suffix of the role's name and the value of
// the oria.operatorframework.io/role label.
type RoleKind string

// Role kinds, in name order.
const (
	// RoleAdmin grants every verb on the API's resource.
	RoleAdmin RoleKind = "admin"
	// RoleEdit grants create, update, patch and delete.
	RoleEdit RoleKind = "edit"
	// RoleView grants get, list and watch.
	RoleView RoleKind = "view"
	// RoleViewCRDView grants get on the API's CustomResourceDefinition, so
	// that viewers can discover the schema (kubectl explain) as in OLM v0.
	RoleViewCRDView RoleKind = "view-crdview"
)

// RoleKinds lists the generated roles of one API in name order.
var RoleKinds = []RoleKind{RoleAdmin, RoleEdit, RoleView, RoleViewCRDView}

// ExtensionRoleKinds maps each generated role name of crds to its kind.
func ExtensionRoleKinds(crds []string) map[string]RoleKind {
	out := make(map[string]RoleKind, len(crds)*len(RoleKinds))
	for _, crd := range crds {
		for _, k := range RoleKinds {
			out[ExtensionRole(crd, k)] = k
		}
	}
	return out
}

// ExtensionRole returns the name of the generated ClusterRole of kind k for
// the CRD named crdName: "<plural>.<group>-<kind>", shortened to
// MaxObjectName. It is the one definition of these names: the extension
// controller creates the roles under it, the RBACPolicy compiler and the
// admission guard bind and check them under it.
func ExtensionRole(crdName string, k RoleKind) string {
	return Shorten(crdName+"-"+string(k), MaxObjectName)
}

// SplitCRDName returns the plural resource and the API group of a CRD from
// its name. The API server only accepts CRDs named "<plural>.<group>", so the
// name alone is enough and the (large) spec need not be read; a name without
// a dot cannot be a valid CRD and is treated as a resource of the core group
// rather than rejected, so a malformed object cannot stop the reconcile.
func SplitCRDName(crd string) (plural, group string) {
	plural, group, _ = strings.Cut(crd, ".")
	return plural, group
}
