package install

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/operator-framework/oria/hack/installer"
	"github.com/operator-framework/oria/internal/servingcert"
	"github.com/operator-framework/oria/test/localcluster"
)

// certManagerDir is the overlay that has cert-manager issue the
// certificate instead.
const certManagerDir = "config/default-certmanager"

// checkGuardCertificate checks the install's serving certificate: oria
// makes it (--cert-management=internal) and writes it into a writable
// in-memory volume at its default --webhook-cert-dir; the names oria's
// flags default to are the install's; oria may read and update only its
// own Secret, in its own namespace, and only its own webhook
// configuration; nothing of cert-manager's.
func checkGuardCertificate(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment, c corev1.Container, hook *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	assert.Contains(t, c.Args, "--cert-management=internal")
	vol := certVolume(t, d, c)
	require.NotNil(t, vol.EmptyDir, "oria writes its certificate into an emptyDir")
	assert.Equal(t, corev1.StorageMediumMemory, vol.EmptyDir.Medium, "the private key stays in memory")
	for _, o := range objs {
		assert.NotEqual(t, certManagerGroup, o.GroupVersionKind().Group, "%s %s: config/default needs no cert-manager", o.GetKind(), o.GetName())
	}
	assert.NotContains(t, hook.Annotations, "cert-manager.io/inject-ca-from")

	ref := hook.Webhooks[0].ClientConfig.Service
	secret := flagValue(c.Args, "--webhook-secret-name", servingcert.DefaultSecretName)
	assert.Equal(t, flagValue(c.Args, "--webhook-service-name", servingcert.DefaultServiceName), ref.Name, "oria makes the certificate for the webhook's Service")
	assert.Equal(t, flagValue(c.Args, "--webhook-configuration-name", servingcert.DefaultWebhookConfigurationName), hook.Name, "oria injects the caBundle of the install's webhook configuration")

	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: d.Namespace}
	nsRules, clusterRules := boundRules(t, objs, sa, d.Namespace)
	for _, verb := range []string{"get", "update"} {
		assert.True(t, grants(nsRules, "", "secrets", verb, secret), "%s its Secret %s", verb, secret)
		assert.False(t, grants(nsRules, "", "secrets", verb, "other"), "%s another Secret in its namespace", verb)
		assert.False(t, grants(clusterRules, "", "secrets", verb, secret), "%s Secrets in every namespace", verb)
		assert.True(t, grants(clusterRules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", verb, hook.Name), "%s its webhook configuration", verb)
	}
	assert.False(t, grants(clusterRules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "update", "other"), "update another webhook configuration")
	assert.True(t, grants(nsRules, "", "secrets", "create", ""), "create its Secret")
}

// TestCertManagerInstall renders config/default-certmanager: config/default
// with cert-manager issuing the certificate into the Secret the pods
// mount (--cert-management=external) and injecting its CA, and without the
// RBAC oria's own certificate management needs.
func TestCertManagerInstall(t *testing.T) {
	b, err := installer.Render(localcluster.RepoRoot(), certManagerDir, testImage)
	require.NoError(t, err)
	objs, err := decodeAll(b)
	require.NoError(t, err)
	one := func(kind string) *unstructured.Unstructured {
		var found []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == kind {
				found = append(found, o)
			}
		}
		require.Len(t, found, 1, "objects of kind %s", kind)
		return found[0]
	}
	d := as[appsv1.Deployment](t, one("Deployment"))
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "--cert-management=external", c.Args[len(c.Args)-1])
	assert.NotContains(t, c.Args, "--cert-management=internal")
	vol := certVolume(t, d, c)
	require.NotNil(t, vol.Secret, "the pods mount the Secret cert-manager issues")
	cert := one("Certificate")
	certSecret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	assert.Equal(t, certSecret, vol.Secret.SecretName)
	one("Issuer")
	hook := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, one("ValidatingWebhookConfiguration"))
	ref := hook.Webhooks[0].ClientConfig.Service
	assert.Equal(t, ref.Namespace+"/"+cert.GetName(), hook.Annotations["cert-manager.io/inject-ca-from"])
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	assert.Contains(t, dns, ref.Name+"."+ref.Namespace+".svc", "the certificate names the Service the API server calls")

	// Otherwise the same install, less the RBAC of oria's own certificates.
	names := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
		slices.Sort(out)
		return out
	}
	var want []string
	for _, n := range names(install) {
		if !strings.HasSuffix(n, "/oria-webhook-cert") {
			want = append(want, n)
		}
	}
	want = append(want, "Certificate "+cert.GetNamespace()+"/"+cert.GetName(), "Issuer "+one("Issuer").GetNamespace()+"/"+one("Issuer").GetName())
	slices.Sort(want)
	if os.Getenv("ORIA_INSTALL_YAML") == "" { // install is config/default, rendered here
		assert.Equal(t, want, names(objs))
	}
}

// certVolume is the volume the container mounts at oria's default
// --webhook-cert-dir.
func certVolume(t *testing.T, d *appsv1.Deployment, c corev1.Container) corev1.Volume {
	t.Helper()
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == oriaDefaultCertDir })
	require.GreaterOrEqual(t, i, 0, "a volume is mounted at %s", oriaDefaultCertDir)
	mount := c.VolumeMounts[i]
	j := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	require.GreaterOrEqual(t, j, 0)
	vol := d.Spec.Template.Spec.Volumes[j]
	assert.Equal(t, vol.EmptyDir == nil, mount.ReadOnly, "writable where oria writes the certificate, read-only where it is mounted")
	return vol
}

// flagValue is the value of flag in args, or def.
func flagValue(args []string, flag, def string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			def = v
		}
	}
	return def
}

// boundRules returns the rules bound to sa in namespace ns (by RoleBindings
// there) and cluster-wide (by ClusterRoleBindings) in objs.
func boundRules(t *testing.T, objs []*unstructured.Unstructured, sa rbacv1.Subject, ns string) (namespaced, cluster []rbacv1.PolicyRule) {
	t.Helper()
	roles, clusterRoles := map[string][]rbacv1.PolicyRule{}, map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role":
			if o.GetNamespace() == ns {
				roles[o.GetName()] = as[rbacv1.Role](t, o).Rules
			}
		case "ClusterRole":
			clusterRoles[o.GetName()] = as[rbacv1.ClusterRole](t, o).Rules
		}
	}
	for _, o := range objs {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		switch o.GetKind() {
		case "RoleBinding":
			if o.GetNamespace() != ns {
				continue
			}
			rb := as[rbacv1.RoleBinding](t, o)
			subjects, ref = rb.Subjects, rb.RoleRef
		case "ClusterRoleBinding":
			crb := as[rbacv1.ClusterRoleBinding](t, o)
			subjects, ref = crb.Subjects, crb.RoleRef
		default:
			continue
		}
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == sa.Kind && s.Name == sa.Name && s.Namespace == sa.Namespace
		}) {
			continue
		}
		switch {
		case o.GetKind() == "ClusterRoleBinding":
			cluster = append(cluster, clusterRoles[ref.Name]...)
		case ref.Kind == "Role":
			namespaced = append(namespaced, roles[ref.Name]...)
		default:
			namespaced = append(namespaced, clusterRoles[ref.Name]...)
		}
	}
	return namespaced, cluster
}

// grants reports whether a rule allows verb on the named resource (any name
// for "").
func grants(rules []rbacv1.PolicyRule, group, resource, verb, name string) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name)))
	})
}
