package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

var checkNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func checkCRD(name, version, oriaVersion string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: version, Served: true, Storage: true}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}}}
	if oriaVersion != "" {
		crd.Labels = map[string]string{oriav1alpha1.LabelVersion: oriaVersion}
	}
	return crd
}

// healthyFacts is an install of oria v0.1.0, checked by the plugin v0.1.0:
// every check is ok but the certificate's, skipped behind a Service.
func healthyFacts() *CheckFacts {
	f := &CheckFacts{Now: checkNow, PluginVersion: "v0.1.0", Namespace: DefaultNamespace, CRDs: map[string]CRDFact{}, Served: map[string]ServedCert{},
		DryRunObject: "ScopeTemplate oria-check-1", Pods: []string{"oria-abc-1", "oria-abc-2"}}
	f.CRDs[ClusterExtensionCRD] = CRDFact{CRD: checkCRD(ClusterExtensionCRD, "v1", "")}
	for _, name := range OriaCRDs {
		f.CRDs[name] = CRDFact{CRD: checkCRD(name, "v1alpha1", "v0.1.0")}
	}
	f.Webhooks = []admissionregistrationv1.ValidatingWebhookConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: "oria-escalation-guard"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: GuardWebhookName, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: testCA(),
				Service: &admissionregistrationv1.ServiceReference{Namespace: DefaultNamespace, Name: "oria-webhook-service"}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, APIVersions: []string{"v1alpha1"},
					Resources: []string{"scopetemplates", "scopeinstances", "rbacpolicies", "accessrequests"}}}}}}}}
	f.Deployment = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: DeploymentName, Generation: 3},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{oriav1alpha1.LabelVersion: "v0.1.0"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.example.com/oria@sha256:0123"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2}}
	f.Lease = &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("oria-abc-2_1234"), LeaseDurationSeconds: ptr.To[int32](137),
		RenewTime: &metav1.MicroTime{Time: checkNow.Add(-5 * time.Second)}}}
	return f
}

// verdictLines writes verdicts as "check result: message" (the fix after
// " => "), for comparing a test's expectations.
func verdictLines(vs []Verdict) []string {
	var out []string
	for _, v := range vs {
		line := v.Check + " " + v.Result
		if v.Fix != "" {
			line += " => " + v.Fix
		}
		out = append(out, line)
	}
	return out
}

func TestVerdictsHealthy(t *testing.T) {
	got := Verdicts(healthyFacts())
	want := []string{"OLM v1 ok", "oria ok", "oria ok", "oria ok", "oria ok", "webhook ok", "certificate skipped", "dry run ok", "replicas ok", "leader ok", "versions ok"}
	if d := cmp.Diff(want, verdictLines(got)); d != "" {
		t.Errorf("Verdicts (-want +got):\n%s", d)
	}
	text := CheckText(&CheckReport{Namespace: DefaultNamespace, PluginVersion: "v0.1.0", ServerVersion: "v0.1.0", Verdicts: got})
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		t.Log(line)
	}
	if !strings.HasSuffix(text, "\n10 ok, 0 warnings, 0 failed, 1 skipped (oria in namespace oria-system; plugin v0.1.0, server v0.1.0)\n") {
		t.Errorf("CheckText ends with %q", text[strings.LastIndex(strings.TrimSuffix(text, "\n"), "\n"):])
	}
}

// TestVerdictsBroken breaks one part of a healthy install at a time: the
// verdict of that part fails (or warns) and names the fix; every other
// verdict stays as it was.
func TestVerdictsBroken(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "x"}, "y", errors.New("no"))
	webhook := func(f *CheckFacts) *admissionregistrationv1.ValidatingWebhook { return &f.Webhooks[0].Webhooks[0] }
	for _, tc := range []struct {
		name   string
		breaks func(f *CheckFacts)
		check  string // the verdict that changes (the first of that name)
		result string
		msg    string // in its message
		fix    string // in its fix
	}{
		{"OLM v1 not installed", func(f *CheckFacts) { f.CRDs[ClusterExtensionCRD] = CRDFact{} }, "OLM v1", CheckFailed, "is not installed", "install OLM v1"},
		{"OLM v1 without v1", func(f *CheckFacts) {
			f.CRDs[ClusterExtensionCRD] = CRDFact{CRD: checkCRD(ClusterExtensionCRD, "v1alpha1", "")}
		}, "OLM v1", CheckFailed,
			"does not serve version v1 (it serves v1alpha1)", "install OLM v1"},
		{"a CRD not readable", func(f *CheckFacts) { f.CRDs[ClusterExtensionCRD] = CRDFact{Err: forbidden} }, "OLM v1", CheckFailed, "could not read", "may get customresourcedefinitions"},
		{"an oria CRD missing", func(f *CheckFacts) { f.CRDs[OriaCRDs[0]] = CRDFact{} }, "oria", CheckFailed, "is not installed", "kubectl apply --server-side"},
		{"an oria CRD not established", func(f *CheckFacts) {
			f.CRDs[OriaCRDs[0]].CRD.Status.Conditions[0].Status = apiextensionsv1.ConditionFalse
		}, "oria", CheckFailed, "is not established", "kubectl describe crd " + OriaCRDs[0]},
		{"a Deployment of another version than its CRDs", func(f *CheckFacts) { f.Deployment.Spec.Template.Labels[oriav1alpha1.LabelVersion] = "v0.2.0" }, "versions", CheckFailed,
			"at v0.1.0; the server is v0.2.0", "apply the install.yaml of one release"},
		{"an oria CRD of another version", func(f *CheckFacts) { f.CRDs[OriaCRDs[0]].CRD.Labels[oriav1alpha1.LabelVersion] = "v0.0.9" }, "versions", CheckFailed,
			OriaCRDs[0] + " at v0.0.9; " + OriaCRDs[1] + ", " + OriaCRDs[2] + ", " + OriaCRDs[3] + " at v0.1.0", "apply the install.yaml of one release"},
		{"a plugin of another release", func(f *CheckFacts) { f.PluginVersion = "v0.2.0" }, "versions", CheckFailed,
			"plugin v0.2.0, but the server is v0.1.0", "use kubectl-oria v0.1.0, or upgrade oria to v0.2.0"},
		{"no webhook configuration", func(f *CheckFacts) { f.Webhooks = nil }, "webhook", CheckFailed, "the escalation guard is not installed", "creates ValidatingWebhookConfiguration oria-escalation-guard"},
		{"webhook configurations not readable", func(f *CheckFacts) { f.WebhooksErr = forbidden }, "webhook", CheckFailed, "could not list", "may list validatingwebhookconfigurations"},
		{"the webhook fails open", func(f *CheckFacts) { webhook(f).FailurePolicy = ptr.To(admissionregistrationv1.Ignore) }, "webhook", CheckFailed,
			"failurePolicy is Ignore", "apply the install again"},
		{"the webhook misses updates of policies", func(f *CheckFacts) {
			webhook(f).Rules = append(webhook(f).Rules, webhook(f).Rules[0])
			webhook(f).Rules[0].Resources = []string{"scopetemplates", "scopeinstances"}
			webhook(f).Rules[1].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
		}, "webhook", CheckFailed, "do not cover UPDATE of rbacpolicies", "apply the install again"},
		{"the webhook has no caBundle", func(f *CheckFacts) { webhook(f).ClientConfig.CABundle = nil }, "webhook", CheckFailed, "caBundle is empty", "fills the caBundle"},
		{"the webhook's caBundle is not PEM", func(f *CheckFacts) { webhook(f).ClientConfig.CABundle = []byte("junk") }, "webhook", CheckFailed, "holds no PEM certificate", "fills the caBundle"},
		{"the URL serves a certificate of another CA", func(f *CheckFacts) {
			webhook(f).ClientConfig.Service, webhook(f).ClientConfig.URL = nil, ptr.To("https://127.0.0.1:9443/validate")
			f.Served["oria-escalation-guard"] = ServedCert{URL: "https://127.0.0.1:9443/validate", VerifyErr: errors.New("x509: certificate signed by unknown authority")}
		}, "certificate", CheckFailed, "that the caBundle of oria-escalation-guard does not verify", "different CAs"},
		{"the URL is not reachable from here", func(f *CheckFacts) {
			webhook(f).ClientConfig.Service, webhook(f).ClientConfig.URL = nil, ptr.To("https://10.0.0.1/validate")
			f.Served["oria-escalation-guard"] = ServedCert{URL: "https://10.0.0.1/validate", Err: errors.New("i/o timeout")}
		}, "certificate", CheckWarning, "could not reach", "where the webhook's URL is reachable"},
		{"the API server cannot verify the guard", func(f *CheckFacts) {
			f.DryRunErr = errors.New(`Internal error occurred: failed calling webhook "escalation-guard.oria.operatorframework.io": tls: failed to verify certificate: x509: certificate signed by unknown authority`)
		}, "dry run", CheckFailed, "could not call the guard", "the caBundle does not verify the certificate"},
		{"nobody serves the guard", func(f *CheckFacts) {
			f.DryRunErr = errors.New(`Internal error occurred: failed calling webhook "escalation-guard.oria.operatorframework.io": no endpoints available for service "oria-webhook-service"`)
		}, "dry run", CheckFailed, "could not call the guard", "no oria replica serves the guard"},
		{"the dry run is forbidden", func(f *CheckFacts) { f.DryRunErr = forbidden }, "dry run", CheckFailed, "forbidden before it reached the guard", "may create scopetemplates"},
		{"no Deployment", func(f *CheckFacts) { f.Deployment = nil }, "replicas", CheckFailed, "oria is not installed in namespace oria-system", "name oria's namespace with -n"},
		{"no replica ready", func(f *CheckFacts) { f.Deployment.Status.ReadyReplicas = 0 }, "replicas", CheckFailed, "0 of 2 replicas", "kubectl -n oria-system describe deployment oria"},
		{"scaled to 0", func(f *CheckFacts) { f.Deployment.Spec.Replicas = ptr.To[int32](0) }, "replicas", CheckFailed, "scaled to 0", "scale deployment oria --replicas=2"},
		{"one replica of two ready", func(f *CheckFacts) { f.Deployment.Status.ReadyReplicas = 1 }, "replicas", CheckWarning, "1 of 2 replicas", "describe deployment oria"},
		{"a rollout in progress", func(f *CheckFacts) { f.Deployment.Status.UpdatedReplicas = 1 }, "replicas", CheckWarning, "a rollout is in progress", "rollout status"},
		{"no Lease", func(f *CheckFacts) { f.Lease = nil }, "leader", CheckFailed, "no replica has been elected", "logs deployment/oria"},
		{"the Lease released", func(f *CheckFacts) { f.Lease.Spec.HolderIdentity = nil }, "leader", CheckFailed, "held by nobody", "logs deployment/oria"},
		{"the Lease not renewed", func(f *CheckFacts) { f.Lease.Spec.RenewTime.Time = checkNow.Add(-10 * time.Minute) }, "leader", CheckFailed,
			"last renewed 10m0s ago (it lasts 2m17s)", "logs deployment/oria"},
		{"the Lease held by another process", func(f *CheckFacts) { f.Lease.Spec.HolderIdentity = ptr.To("laptop_99") }, "leader", CheckWarning,
			"not a pod of Deployment oria-system/oria", "stop the other oria process"},
		{"an install of another version", func(f *CheckFacts) {
			f.Deployment.Spec.Template.Labels[oriav1alpha1.LabelVersion] = "v0.2.0"
			for _, name := range OriaCRDs {
				f.CRDs[name].CRD.Labels[oriav1alpha1.LabelVersion] = "v0.2.0"
			}
		}, "versions", CheckFailed,
			"plugin v0.1.0, but the server is v0.2.0", "use kubectl-oria v0.2.0, or upgrade oria to v0.1.0"},
		{"a plugin of no version", func(f *CheckFacts) { f.PluginVersion = "(devel)" }, "versions", CheckWarning,
			"the plugin is a development build ((devel)): not compared with the server (v0.1.0)", "make build"},
		{"server of no recorded version", func(f *CheckFacts) {
			f.Deployment.Spec.Template.Labels = nil
			for _, name := range OriaCRDs {
				f.CRDs[name].CRD.Labels = nil
			}
		}, "versions", CheckWarning, "the server's version is unknown", "install from a release's install.yaml"},
		{"server of no recorded version but its CRDs'", func(f *CheckFacts) { f.Deployment.Spec.Template.Labels = nil }, "versions", CheckOK,
			"plugin and server are both v0.1.0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := verdictLines(Verdicts(healthyFacts()))
			f := healthyFacts()
			tc.breaks(f)
			got := Verdicts(f)
			changed := -1
			for i, v := range got {
				if v.Check == tc.check && (changed < 0 || got[changed].Result == CheckOK) {
					changed = i
				}
			}
			if changed < 0 {
				t.Fatalf("no verdict %q in %v", tc.check, verdictLines(got))
			}
			v := got[changed]
			t.Logf("%s %s: %s. Fix: %s", v.Result, v.Check, v.Message, v.Fix)
			if v.Result != tc.result || !strings.Contains(v.Message, tc.msg) || !strings.Contains(v.Fix, tc.fix) {
				t.Errorf("verdict %+v, want %s with %q in its message and %q in its fix", v, tc.result, tc.msg, tc.fix)
			}
			// The others are as on a healthy install, but for what follows
			// from the break (no Deployment: no version to compare; a URL:
			// the certificate is compared).
			for i, line := range verdictLines(got) {
				if i == changed || i >= len(want) || line == want[i] {
					continue
				}
				switch {
				case tc.name == "no Deployment" && got[i].Check == "versions" && got[i].Result == CheckSkipped:
				case strings.HasPrefix(tc.name, "the URL") && got[i].Check == "certificate":
				case strings.HasPrefix(tc.name, "no webhook") || strings.HasPrefix(tc.name, "webhook configurations"):
				case (strings.HasSuffix(tc.name, "fails open") || strings.HasSuffix(tc.name, "misses updates of policies")) && got[i].Check == "dry run":
					// Admitted, but without the guard's answer.
					if got[i].Result != CheckWarning {
						t.Errorf("dry run %s, want a warning", got[i].Result)
					}
				default:
					t.Errorf("verdict %d changed too: %q, was %q", i, line, want[i])
				}
			}
		})
	}
}

func TestServerVersionOf(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		image  string
		want   string
	}{
		{map[string]string{oriav1alpha1.LabelVersion: "v0.1.0"}, "oria:latest", "v0.1.0"},
		{nil, "registry.example.com:5000/oria:v0.2.0", "v0.2.0"},
		{nil, "registry.example.com:5000/oria:v0.2.0@sha256:0123", "v0.2.0"},
		{nil, "registry.example.com:5000/oria@sha256:0123", ""},
		{nil, "oria:latest", ""},
		{nil, "oria", ""},
	} {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: tc.image}}}}}}
		if got, from := ServerVersionOf(d); got != tc.want {
			t.Errorf("ServerVersionOf(%v, %s) = %q (%s), want %q", tc.labels, tc.image, got, from, tc.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	for err, want := range map[error]int{
		nil:                               ExitOK,
		errors.New("no kubeconfig"):       ExitError,
		answerNo("1 of 2 checks failed"):  ExitNo,
		fmt.Errorf("x: %w", answerNo("")): ExitNo,
	} {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

// outsideFacts is oria as `make run` runs it, outside the cluster: the
// guard's webhook calls a URL, which serves a certificate the caBundle
// verifies; no Deployment; the Lease held in kube-system by the process;
// CRDs without a version label; a plugin stamped by make build.
func outsideFacts() *CheckFacts {
	f := healthyFacts()
	f.PluginVersion = "6ddfe57-dirty"
	for _, name := range OriaCRDs {
		f.CRDs[name].CRD.Labels = nil
	}
	wh := &f.Webhooks[0].Webhooks[0]
	wh.ClientConfig.Service, wh.ClientConfig.URL = nil, ptr.To("https://127.0.0.1:40123/validate-oria-operatorframework-io-v1alpha1")
	f.Served["oria-escalation-guard"] = ServedCert{URL: *wh.ClientConfig.URL, Subject: "subject O=kubebuilder for 127.0.0.1", NotAfter: checkNow.Add(24 * time.Hour)}
	f.Deployment, f.Pods = nil, nil
	f.Lease.Spec.HolderIdentity, f.LeaseNamespace = ptr.To("laptop_1234"), OutsideLeaseNamespace
	return f
}

// TestVerdictsOutside: check recognises an oria outside the cluster and
// fails nothing that applies to it; what does not apply is skipped.
func TestVerdictsOutside(t *testing.T) {
	f := outsideFacts()
	if got := OutsideURL(f); got != "https://127.0.0.1:40123/validate-oria-operatorframework-io-v1alpha1" {
		t.Fatalf("OutsideURL = %q", got)
	}
	got := Verdicts(f)
	want := []string{"OLM v1 ok", "oria ok", "oria ok", "oria ok", "oria ok", "webhook ok", "certificate ok", "dry run ok", "replicas skipped", "leader ok", "versions skipped"}
	if d := cmp.Diff(want, verdictLines(got)); d != "" {
		t.Errorf("Verdicts (-want +got):\n%s", d)
	}
	text := CheckText(&CheckReport{Namespace: DefaultNamespace, Outside: OutsideURL(f), PluginVersion: f.PluginVersion, Verdicts: got})
	t.Log("\n" + text)
	for _, s := range []string{"skipped  replicas: oria runs outside the cluster", "ok       leader: Lease kube-system/" + LeaseName + " is held by laptop_1234",
		"(oria outside the cluster, its guard at https://127.0.0.1:40123/validate-oria-operatorframework-io-v1alpha1; plugin 6ddfe57-dirty, server unknown)"} {
		if !strings.Contains(text, s) {
			t.Errorf("the text lacks %q", s)
		}
	}

	// Without --leader-elect there is no Lease: not known, not failed.
	f.Lease = nil
	if v := Verdicts(f)[9]; v.Check != "leader" || v.Result != CheckWarning || !strings.Contains(v.Fix, "--leader-elect") {
		t.Errorf("no Lease outside: %+v", v)
	}
	// A URL with a Deployment is an install in the cluster: its replicas
	// are checked.
	f = outsideFacts()
	f.Deployment = healthyFacts().Deployment
	if OutsideURL(f) != "" {
		t.Error("a Deployment is an install in the cluster")
	}
	// A Service is in the cluster: no Deployment fails.
	f = healthyFacts()
	f.Deployment = nil
	if v := Verdicts(f)[8]; OutsideURL(f) != "" || v.Check != "replicas" || v.Result != CheckFailed {
		t.Errorf("a Service without a Deployment: %+v", v)
	}
}
