package bundlerole

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
)

var crds = []string{"foos.example.com", "bars.other.io"}

func rule(groups, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
}

func crdRule(resourceNames []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
		ResourceNames: resourceNames, Verbs: verbs}
}

func list(s ...string) []string { return s }

func TestBeyond(t *testing.T) {
	tests := []struct {
		name  string
		kind  names.RoleKind
		rules []rbacv1.PolicyRule
		want  []string
	}{{
		name:  "the generated view rules are within",
		kind:  names.RoleView,
		rules: []rbacv1.PolicyRule{rule(list("example.com"), list("foos"), "get", "list", "watch")},
	}, {
		name: "any verbs, resourceNames and the extension's other APIs are within",
		kind: names.RoleAdmin,
		rules: []rbacv1.PolicyRule{
			rule(list("example.com"), list("foos"), "*"),
			rule(list("other.io"), list("bars"), "get"),
			{APIGroups: list("example.com"), Resources: list("foos"), ResourceNames: list("one"), Verbs: list("delete")},
		},
	}, {
		name:  "subresources of the extension's APIs are within",
		kind:  names.RoleEdit,
		rules: []rbacv1.PolicyRule{rule(list("example.com"), list("foos/status", "foos/scale", "foos"), "get", "update", "patch")},
	}, {
		name:  "reading the extension's own CRDs by name is within any kind",
		kind:  names.RoleView,
		rules: []rbacv1.PolicyRule{rule(list("example.com"), list("foos"), "get"), crdRule(list("foos.example.com", "bars.other.io"), "get", "list", "watch")},
	}, {
		name:  "the generated view-crdview rules are within",
		kind:  names.RoleViewCRDView,
		rules: []rbacv1.PolicyRule{crdRule(list("foos.example.com"), "get")},
	}, {
		name:  "a rule that names no group grants nothing",
		kind:  names.RoleView,
		rules: []rbacv1.PolicyRule{rule(nil, list("secrets"), "get")},
	}, {
		name:  "secrets in the core group",
		kind:  names.RoleView,
		rules: []rbacv1.PolicyRule{rule(list("example.com"), list("foos"), "get"), rule(list(""), list("secrets"), "get", "list")},
		want: list(`rule 2 {apiGroups: [""], resources: ["secrets"], verbs: ["get", "list"]}: ` +
			`grants resource "secrets" of the core API group, which is not an API of the extension`),
	}, {
		name:  "another group",
		kind:  names.RoleEdit,
		rules: []rbacv1.PolicyRule{rule(list("example.com", "apps"), list("foos"), "update")},
		want: list(`rule 1 {apiGroups: ["example.com", "apps"], resources: ["foos"], verbs: ["update"]}: ` +
			`grants resource "foos" of API group "apps", which is not an API of the extension`),
	}, {
		name:  "groups and resources multiply: the extension's plurals in each other's group are not its APIs",
		kind:  names.RoleAdmin,
		rules: []rbacv1.PolicyRule{rule(list("example.com", "other.io"), list("foos", "bars"), "*")},
		want: list(`rule 1 {apiGroups: ["example.com", "other.io"], resources: ["foos", "bars"], verbs: ["*"]}: ` +
			`grants resource "foos" of API group "other.io", which is not an API of the extension; ` +
			`grants resource "bars" of API group "example.com", which is not an API of the extension`),
	}, {
		name:  "a plural of the extension in the other CRD's group is not its API",
		kind:  names.RoleView,
		rules: []rbacv1.PolicyRule{rule(list("other.io"), list("foos"), "get")},
		want: list(`rule 1 {apiGroups: ["other.io"], resources: ["foos"], verbs: ["get"]}: ` +
			`grants resource "foos" of API group "other.io", which is not an API of the extension`),
	}, {
		name:  "another subresource's base",
		kind:  names.RoleEdit,
		rules: []rbacv1.PolicyRule{rule(list(""), list("pods/exec"), "create")},
		want: list(`rule 1 {apiGroups: [""], resources: ["pods/exec"], verbs: ["create"]}: ` +
			`grants resource "pods/exec" of the core API group, which is not an API of the extension`),
	}, {
		name:  "* resource",
		kind:  names.RoleAdmin,
		rules: []rbacv1.PolicyRule{rule(list("example.com"), list("*"), "*")},
		want:  list(`rule 1 {apiGroups: ["example.com"], resources: ["*"], verbs: ["*"]}: grants every resource ("*")`),
	}, {
		name:  "*/subresource",
		kind:  names.RoleEdit,
		rules: []rbacv1.PolicyRule{rule(list("example.com"), list("*/scale"), "update")},
		want: list(`rule 1 {apiGroups: ["example.com"], resources: ["*/scale"], verbs: ["update"]}: ` +
			`grants subresource "scale" of every resource ("*/scale")`),
	}, {
		name:  "* group",
		kind:  names.RoleView,
		rules: []rbacv1.PolicyRule{rule(list("*"), list("foos"), "get")},
		want:  list(`rule 1 {apiGroups: ["*"], resources: ["foos"], verbs: ["get"]}: grants resources of every API group ("*")`),
	}, {
		name:  "non-resource URL",
		kind:  names.RoleView,
		rules: []rbacv1.PolicyRule{{NonResourceURLs: list("/metrics"), Verbs: list("get")}},
		want:  list(`rule 1 {nonResourceURLs: ["/metrics"], verbs: ["get"]}: grants non-resource URLs ["/metrics"]`),
	}, {
		name:  "crdview for another CRD's name",
		kind:  names.RoleViewCRDView,
		rules: []rbacv1.PolicyRule{crdRule(list("foos.example.com", "secrets.vault.io"), "get")},
		want: list(`rule 1 {apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], resourceNames: ["foos.example.com", "secrets.vault.io"], verbs: ["get"]}: ` +
			`grants CustomResourceDefinition "secrets.vault.io", which is not one of the extension's`),
	}, {
		name:  "crdview without resourceNames",
		kind:  names.RoleViewCRDView,
		rules: []rbacv1.PolicyRule{crdRule(nil, "get", "list")},
		want: list(`rule 1 {apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["get", "list"]}: ` +
			`grants CustomResourceDefinitions without resourceNames (every CustomResourceDefinition of the cluster)`),
	}, {
		name:  "crdview with a write verb",
		kind:  names.RoleViewCRDView,
		rules: []rbacv1.PolicyRule{crdRule(list("foos.example.com"), "get", "delete", "*")},
		want: list(`rule 1 {apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], resourceNames: ["foos.example.com"], verbs: ["get", "delete", "*"]}: ` +
			`grants verbs ["delete", "*"] on CustomResourceDefinitions (only get, list and watch are within)`),
	}, {
		name:  "crdview granting the extension's resources",
		kind:  names.RoleViewCRDView,
		rules: []rbacv1.PolicyRule{crdRule(list("foos.example.com"), "get"), rule(list("example.com"), list("foos"), "get")},
		want: list(`rule 2 {apiGroups: ["example.com"], resources: ["foos"], verbs: ["get"]}: ` +
			`grants resource "foos" of API group "example.com", but a view-crdview role may only read the extension's CustomResourceDefinitions`),
	}, {
		name: "several problems in one rule, several rules",
		kind: names.RoleView,
		rules: []rbacv1.PolicyRule{
			rule(list("", "example.com"), list("secrets", "foos"), "get"),
			{APIGroups: list("*"), Resources: list("*"), NonResourceURLs: list("*"), Verbs: list("*")},
		},
		want: list(
			`rule 1 {apiGroups: ["", "example.com"], resources: ["secrets", "foos"], verbs: ["get"]}: `+
				`grants resource "secrets" of the core API group, which is not an API of the extension; `+
				`grants resource "secrets" of API group "example.com", which is not an API of the extension; `+
				`grants resource "foos" of the core API group, which is not an API of the extension`,
			`rule 2 {apiGroups: ["*"], resources: ["*"], nonResourceURLs: ["*"], verbs: ["*"]}: `+
				`grants non-resource URLs ["*"]; grants resources of every API group ("*"); grants every resource ("*")`),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Beyond(tc.kind, tc.rules, crds)); diff != "" {
				t.Errorf("Beyond (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	got := Describe("foos.example.com-view", list("rule 1 a", "rule 2 b", "rule 3 c", "rule 4 d", "rule 5 e"))
	want := `bundle-provided ClusterRole "foos.example.com-view" reaches beyond the extension's own APIs: rule 1 a; rule 2 b; rule 3 c (and 2 more rule(s))`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
}

func TestTooBroad(t *testing.T) {
	bundle := func(name, ext string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
		return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
			oriav1alpha1.LabelOLMOwnerName: ext,
		}}, Rules: rules}
	}
	secrets := rule(list(""), list("secrets"), "get")
	oriaRole := bundle("foos.example.com-edit", "ext", secrets)
	oriaRole.Labels[oriav1alpha1.LabelManaged] = oriav1alpha1.ManagedValue
	deleting := bundle("bars.other.io-view", "ext", secrets)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	roles := []rbacv1.ClusterRole{
		bundle("foos.example.com-view", "ext", rule(list("example.com"), list("foos"), "get"), secrets),
		bundle("foos.example.com-admin", "ext", rule(list("example.com"), list("foos"), "*")),
		// Judged as a view-crdview role by its name: reading the CRD's
		// objects is beyond that kind.
		bundle("foos.example.com-view-crdview", "ext", rule(list("example.com"), list("foos"), "get")),
		bundle("bars.other.io-admin", "another-ext", secrets), // another extension's
		bundle("operator-manager", "ext", secrets),            // not a generated name
		oriaRole, // oria's role its bundle adopted: the bundle's now, judged as such
		deleting,
	}
	got := TooBroad("ext", crds, roles)
	want := map[string]string{
		"foos.example.com-edit": `bundle-provided ClusterRole "foos.example.com-edit" reaches beyond the extension's own APIs: ` +
			`rule 1 {apiGroups: [""], resources: ["secrets"], verbs: ["get"]}: grants resource "secrets" of the core API group, which is not an API of the extension`,
		"foos.example.com-view": `bundle-provided ClusterRole "foos.example.com-view" reaches beyond the extension's own APIs: ` +
			`rule 2 {apiGroups: [""], resources: ["secrets"], verbs: ["get"]}: grants resource "secrets" of the core API group, which is not an API of the extension`,
		"foos.example.com-view-crdview": `bundle-provided ClusterRole "foos.example.com-view-crdview" reaches beyond the extension's own APIs: ` +
			`rule 1 {apiGroups: ["example.com"], resources: ["foos"], verbs: ["get"]}: grants resource "foos" of API group "example.com", but a view-crdview role may only read the extension's CustomResourceDefinitions`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TooBroad (-want +got):\n%s", diff)
	}
}
