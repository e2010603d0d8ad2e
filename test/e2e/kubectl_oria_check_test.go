package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// TestKubectlOriaCheck runs `kubectl oria check` against the suite's
// cluster. There oria is a process outside the cluster, as under `make run`:
// the guard's webhook has a URL, not a Service, and there is no Deployment.
// check recognises it and checks what applies (the webhook, the certificate
// served at the URL, the dry run, the Lease in kube-system, where oria elects
// its leader outside a pod): no line fails. A healthy install is then
// represented in a namespace of its own by what check reads of one: oria's
// Deployment, with a ready pod (kube-controller-manager makes it; its status
// is set here, there is no kubelet), and the leader Lease held by that pod.
// Then each part is broken in turn, and check fails (exit code 2) on it and
// names the fix; a plugin of another release is one failed line.
func TestKubectlOriaCheck(t *testing.T) {
	testutil.NeedCluster(t)
	var plugin cli.VersionInfo
	require.NoError(t, json.Unmarshal([]byte(kubectlOria(t, "version", "--client", "-o", "json")), &plugin))

	// The suite's cluster as it is: oria outside the cluster, found from
	// oria's default namespace and from kube-system alike.
	for _, args := range [][]string{nil, {"-n", "kube-system"}} {
		report, code := checkOf(t, args...)
		logCheck(t, fmt.Sprintf("oria outside the cluster, %v", args), report)
		assert.Equal(t, cli.ExitOK, code, "no check fails: %+v", report.Verdicts)
		assert.Zero(t, countVerdicts(report, cli.CheckFailed)+countVerdicts(report, cli.CheckWarning), "%+v", report.Verdicts)
		assert.Contains(t, report.Outside, "https://127.0.0.1:")
		assert.NotContains(t, report.Outside, "//validate")
		assertVerdict(t, report, "OLM v1", cli.CheckOK, "serves v1", "")
		for _, crd := range cli.OriaCRDs {
			assertVerdict(t, report, "oria", cli.CheckOK, crd+" is established and serves v1alpha1 (no "+oriav1alpha1.LabelVersion+" label)", "")
		}
		assertVerdict(t, report, "webhook", cli.CheckOK, localcluster.WebhookConfigurationName+" sends every create and update", "")
		assertVerdict(t, report, "certificate", cli.CheckOK, "which the caBundle verifies", "")
		assertVerdict(t, report, "dry run", cli.CheckOK, "was admitted by the guard", "")
		assertVerdict(t, report, "replicas", cli.CheckSkipped, "oria runs outside the cluster (the guard's webhook calls "+report.Outside+", not a Service)", "")
		assertVerdict(t, report, "leader", cli.CheckOK, "kube-system/"+cli.LeaseName+" is held by", "")
		assertVerdict(t, report, "versions", cli.CheckSkipped, "plugin "+plugin.Version+"; oria runs outside the cluster", "")
	}
	text, _, err := runPlugin(t, "", "check")
	require.NoError(t, err)
	t.Logf("kubectl oria check:\n%s", text)
	assert.NotContains(t, text, "FAILED")
	assert.NotContains(t, text, "//validate")
	assert.Contains(t, text, "(oria outside the cluster, its guard at https://127.0.0.1:")

	// A healthy install.
	ns := testutil.CreateNamespace(t, k8sClient, "oria-check", nil)
	pod := fakeInstall(t, ns, plugin.Version)
	report, code := checkOf(t, "-n", ns)
	logCheck(t, "a healthy install", report)
	assert.Equal(t, cli.ExitOK, code, "nothing fails: %+v", report.Verdicts)
	for _, v := range report.Verdicts {
		assert.Equal(t, cli.CheckOK, v.Result, "%+v", v)
	}
	assert.Empty(t, report.Outside)
	assert.Equal(t, plugin.Version, report.ServerVersion)
	text, _, err = runPlugin(t, "", "check", "-n", ns)
	require.NoError(t, err)
	t.Logf("kubectl oria check -n %s:\n%s", ns, text)
	assert.Contains(t, text, "11 ok, 0 warnings, 0 failed, 0 skipped (oria in namespace "+ns+"; plugin "+plugin.Version+", server "+plugin.Version+")")

	broken := func(what, check, msg, fix string, breaks, restores func()) {
		t.Helper()
		breaks()
		r, code := checkOf(t, "-n", ns)
		restores()
		assert.Equal(t, cli.ExitNo, code, "%s: exit code", what)
		v := assertVerdict(t, r, check, cli.CheckFailed, msg, fix)
		t.Logf("%s: %s %s: %s. Fix: %s", what, v.Result, v.Check, v.Message, v.Fix)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: cli.OriaCRDs[2]}, crd))
	broken("a CRD of another version", "versions", customresourcedefinitionsAt(cli.OriaCRDs[2], "v0.0.0-other"), "apply the install.yaml of one release",
		func() {
			testutil.Update(t, k8sClient, crd, func() { crd.Labels = map[string]string{oriav1alpha1.LabelVersion: "v0.0.0-other"} })
		},
		func() { testutil.Update(t, k8sClient, crd, func() { delete(crd.Labels, oriav1alpha1.LabelVersion) }) })

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cli.LeaseName}}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(lease), lease))
	renewed := lease.Spec.RenewTime
	broken("the leader stopped renewing", "leader", "the leader stopped renewing it", "logs deployment/oria",
		func() {
			testutil.Update(t, k8sClient, lease, func() {
				lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds = &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}, ptr.To[int32](15)
			})
		},
		func() {
			testutil.Update(t, k8sClient, lease, func() { lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds = renewed, ptr.To[int32](3600) })
		})

	// No replica ready: the pod is not ready any more; then ready again.
	// The suite's cluster has no node (no kubelet), so that is said once,
	// on the nodes line, and the replicas line follows from it.
	setReady := func(ready corev1.ConditionStatus) {
		testutil.UpdateStatus(t, k8sClient, pod, func() {
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
		})
	}
	setReady(corev1.ConditionFalse)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, code, err := checkRun("-n", ns)
		if !assert.NoError(c, err) {
			return
		}
		assert.Equal(c, cli.ExitNo, code)
		assertVerdict(c, r, "nodes", cli.CheckFailed, "the cluster has no node: no pod can run, so Deployment "+ns+"/oria has no replica", "add a node")
		assertVerdict(c, r, "replicas", cli.CheckSkipped, "needs a node (no node is Ready, see the nodes line): 0 of 1 replicas of Deployment "+ns+"/oria are ready", "")
		assert.Equal(c, 1, countVerdicts(r, cli.CheckFailed), "one cause, one failed line: %+v", r.Verdicts)
	}, testutil.Timeout, testutil.Interval)
	setReady(corev1.ConditionTrue)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, code, err := checkRun("-n", ns)
		assert.NoError(c, err)
		assert.Equal(c, cli.ExitOK, code)
	}, testutil.Timeout, testutil.Interval)

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cli.DeploymentName}}
	broken("scaled to 0", "replicas", "scaled to 0 replicas", "--replicas=2",
		func() { testutil.Update(t, k8sClient, d, func() { d.Spec.Replicas = ptr.To[int32](0) }) },
		func() { testutil.Update(t, k8sClient, d, func() { d.Spec.Replicas = ptr.To[int32](1) }) })

	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: localcluster.WebhookConfigurationName}}
	require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKeyFromObject(hook), hook))
	caBundle := hook.Webhooks[0].ClientConfig.CABundle
	other := otherCA(t)
	setCA := func(ca []byte) func() {
		return func() { testutil.Update(t, k8sClient, hook, func() { hook.Webhooks[0].ClientConfig.CABundle = ca }) }
	}
	broken("the caBundle of another CA: as served", "certificate", "that the caBundle of "+hook.Name+" does not verify", "different CAs", setCA(other), setCA(caBundle))
	broken("the caBundle of another CA: through the API server", "dry run", "could not call the guard", "the caBundle does not verify the certificate", setCA(other), setCA(caBundle))
	saved := hook.DeepCopy()
	broken("no webhook configuration", "webhook", "the escalation guard is not installed", "kubectl apply --server-side -f install.yaml",
		func() { require.NoError(t, k8sClient.Delete(context.Background(), hook)) },
		func() {
			saved.ResourceVersion, saved.UID = "", ""
			require.NoError(t, k8sClient.Create(context.Background(), saved))
		})

	// A plugin of another release than the install (its CRDs and its
	// server, a healthy install of its own): one failed line, with the fix.
	otherNS := testutil.CreateNamespace(t, k8sClient, "oria-check-other", nil)
	fakeInstall(t, otherNS, "v0.0.0-other")
	crds := make([]*apiextensionsv1.CustomResourceDefinition, len(cli.OriaCRDs))
	for i, name := range cli.OriaCRDs {
		crds[i] = &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, crds[i]))
		testutil.Update(t, k8sClient, crds[i], func() { crds[i].Labels = map[string]string{oriav1alpha1.LabelVersion: "v0.0.0-other"} })
	}
	report, code = checkOf(t, "-n", otherNS)
	logCheck(t, "a plugin of another release", report)
	assert.Equal(t, cli.ExitNo, code)
	assert.Equal(t, 1, countVerdicts(report, cli.CheckFailed), "version skew is one failed line: %+v", report.Verdicts)
	assertVerdict(t, report, "versions", cli.CheckFailed, "but the server is v0.0.0-other", "use kubectl-oria v0.0.0-other, or upgrade oria to "+plugin.Version)
	for i := range crds {
		testutil.Update(t, k8sClient, crds[i], func() { delete(crds[i].Labels, oriav1alpha1.LabelVersion) })
	}

	// The guard still answers: nothing depends on the fake install.
	report, _ = checkOf(t, "-n", ns)
	assertVerdict(t, report, "dry run", cli.CheckOK, "admitted by the guard", "")
}

// fakeInstall creates in ns what check reads of an install of oria at
// version: Deployment oria (one replica, its pods labelled with the
// version), its pod made ready, and the Lease held by that pod. It
// returns the pod.
func fakeInstall(t *testing.T, ns, version string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	app := map[string]string{"app.kubernetes.io/name": testutil.UniqueName("oria")}
	labels := map[string]string{oriav1alpha1.LabelVersion: version}
	for k, v := range app {
		labels[k] = v
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cli.DeploymentName},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "oria:" + version}}}}}}
	testutil.Create(t, k8sClient, d)
	// kube-controller-manager's deployment and replicaset controllers make
	// the pod; no kubelet runs it, so its readiness is set here.
	var pod *corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var pods corev1.PodList
		require.NoError(c, k8sClient.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(app)))
		if assert.Len(c, pods.Items, 1) {
			pod = &pods.Items[0]
		}
	}, testutil.Timeout, testutil.Interval)
	testutil.UpdateStatus(t, k8sClient, pod, func() {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, k8sClient.Get(ctx, client.ObjectKeyFromObject(d), d))
		assert.Equal(c, int32(1), d.Status.ReadyReplicas)
		assert.Equal(c, int32(1), d.Status.UpdatedReplicas)
		assert.Equal(c, d.Generation, d.Status.ObservedGeneration)
	}, testutil.Timeout, testutil.Interval)
	testutil.Create(t, k8sClient, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cli.LeaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pod.Name + "_e2e"), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: &metav1.MicroTime{Time: time.Now()}}})
	return pod
}

// checkOf runs `kubectl oria check -o json args...` and returns the report
// and the exit code.
func checkOf(t *testing.T, args ...string) (cli.CheckReport, int) {
	t.Helper()
	kubectlOria(t, "version", "--client") // builds the plugin once
	report, code, err := checkRun(args...)
	require.NoError(t, err)
	return report, code
}

// checkRun is checkOf once the plugin is built, without a test (for
// Eventually callbacks).
func checkRun(args ...string) (cli.CheckReport, int, error) {
	var report cli.CheckReport
	out, stderr, err := execPlugin(pluginBin, append([]string{"check", "-o", "json"}, args...)...)
	code := cli.ExitOK
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		return report, code, fmt.Errorf("%w: %s", err, stderr)
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		return report, code, fmt.Errorf("%w: %s\n%s", err, out, stderr)
	}
	return report, code, nil
}

// assertVerdict asserts that a verdict of check has result, msg in its
// message and fix in its fix, and returns it (the first of that check with
// result, else the first of that check).
func assertVerdict(t assert.TestingT, r cli.CheckReport, check, result, msg, fix string) cli.Verdict {
	var found *cli.Verdict
	for i, v := range r.Verdicts {
		if v.Check == check && strings.Contains(v.Message, msg) && (found == nil || found.Result != result) {
			found = &r.Verdicts[i]
		}
	}
	if !assert.NotNil(t, found, "no verdict %q with %q in %+v", check, msg, r.Verdicts) {
		return cli.Verdict{}
	}
	assert.Equal(t, result, found.Result, "%+v", *found)
	assert.Contains(t, found.Fix, fix, "%+v", *found)
	return *found
}

// countVerdicts counts the verdicts with result.
func countVerdicts(r cli.CheckReport, result string) int {
	n := 0
	for _, v := range r.Verdicts {
		if v.Result == result {
			n++
		}
	}
	return n
}

// customresourcedefinitionsAt is how the versions check names a CRD at a
// version other than the server's.
func customresourcedefinitionsAt(name, version string) string {
	return name + " at " + version
}

func logCheck(t *testing.T, what string, r cli.CheckReport) {
	t.Helper()
	var lines []string
	for _, v := range r.Verdicts {
		lines = append(lines, v.Result+" "+v.Check+": "+v.Message+" "+v.Fix)
	}
	t.Logf("check, %s:\n%s", what, strings.Join(lines, "\n"))
}

// otherCA is a CA certificate (PEM) that signed nothing the cluster serves.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
