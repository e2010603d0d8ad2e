package cli

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// What `kubectl oria check` looks for, as the install (config/default)
// names it.
const (
	// DefaultNamespace is oria's namespace in the install; -n names another.
	DefaultNamespace = "oria-system"
	// DeploymentName is oria's Deployment, in oria's namespace.
	DeploymentName = "oria"
	// LeaseName is the leader-election Lease of oria's replicas, in oria's
	// namespace (internal/manager's LeaderElectionID; the plugin does not
	// link the manager, a test keeps the two equal).
	LeaseName = "oria.operatorframework.io"
	// GuardWebhookName is the escalation guard's webhook in its
	// ValidatingWebhookConfiguration (internal/admission's WebhookName).
	GuardWebhookName = "escalation-guard.oria.operatorframework.io"
)

// Results of a check.
const (
	CheckOK      = "ok"
	CheckWarning = "warning"
	CheckFailed  = "failed"
	// CheckSkipped: not checked (what it needs is missing, or cannot be
	// reached from here); says why.
	CheckSkipped = "skipped"
)

// Verdict is one line of `kubectl oria check`.
type Verdict struct {
	// Check names what was checked.
	Check string `json:"check"`
	// Result is ok, warning, failed or skipped.
	Result  string `json:"result"`
	Message string `json:"message"`
	// Fix says what to do about a warning or a failure.
	Fix string `json:"fix,omitempty"`
	// Object is what the verdict is about, as `kubectl get` takes it
	// (kind.group/name; in Namespace when it is namespaced).
	Object    string `json:"object,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// CheckReport is the body of `kubectl oria check -o json|yaml`.
type CheckReport struct {
	// Namespace is oria's namespace, where its Deployment and Lease are.
	Namespace string `json:"namespace"`
	// Outside is the URL the API server calls oria's guard at when oria runs
	// outside the cluster (make run): the webhook has a URL, not a Service,
	// and there is no Deployment.
	Outside       string    `json:"outside,omitempty"`
	PluginVersion string    `json:"pluginVersion"`
	ServerVersion string    `json:"serverVersion,omitempty"`
	Verdicts      []Verdict `json:"verdicts"`
}

// CRDFact is what the check read of one CRD: nil CRD when it is not
// installed, Err when it could not be read.
type CRDFact struct {
	CRD *apiextensionsv1.CustomResourceDefinition
	Err error
}

// ServedCert is what a TLS handshake with a webhook's URL found, when the
// webhook is served at a URL the plugin can reach.
type ServedCert struct {
	URL string
	// Err: the handshake failed before the certificate was seen.
	Err error
	// VerifyErr: the served certificate does not verify with the caBundle.
	VerifyErr error
	Subject   string
	NotAfter  time.Time
}

// CheckFacts is everything `kubectl oria check` read from the cluster; the
// verdicts are a pure function of it (Verdicts).
type CheckFacts struct {
	Now           time.Time
	PluginVersion string
	Namespace     string
	// CRDs by name: ClusterExtension's and oria's three.
	CRDs map[string]CRDFact
	// Webhooks are the configurations with the guard's webhook.
	Webhooks    []admissionregistrationv1.ValidatingWebhookConfiguration
	WebhooksErr error
	// Served is the certificate served at each configuration's URL (by
	// configuration name); a Service is not reached from here.
	Served map[string]ServedCert
	// DryRunObject is the object of the server-side dry run ("" when none
	// was made), DryRunErr its answer.
	DryRunObject string
	DryRunErr    error
	// Deployment is nil when it does not exist.
	Deployment    *appsv1.Deployment
	DeploymentErr error
	// Pods are the names of the Deployment's pods (PodsErr when they
	// could not be listed).
	Pods    []string
	PodsErr error
	// Lease is nil when it does not exist; LeaseNamespace is where it was
	// read (Namespace, or OutsideLeaseNamespace for an oria that runs
	// outside the cluster).
	Lease          *coordinationv1.Lease
	LeaseErr       error
	LeaseNamespace string
	// Nodes are the cluster's nodes, read for an install in the cluster
	// (checknodes.go).
	Nodes NodeFacts
}

// ClusterExtensionCRD is the CRD of OLM v1's ClusterExtension.
var ClusterExtensionCRD = "clusterextensions." + ocv1.GroupVersion.Group

// OriaCRDs are the CRDs of oria's kinds.
var OriaCRDs = []string{
	"rbacpolicies." + oriav1alpha1.GroupVersion.Group,
	"scopetemplates." + oriav1alpha1.GroupVersion.Group,
	"scopeinstances." + oriav1alpha1.GroupVersion.Group,
	"accessrequests." + oriav1alpha1.GroupVersion.Group,
}

const crdObject = "customresourcedefinition.apiextensions.k8s.io/"

// Verdicts judges an install from what the check read, in the order the
// checks are printed.
func Verdicts(f *CheckFacts) []Verdict {
	out := []Verdict{crdVerdict(f, "OLM v1", ClusterExtensionCRD, ocv1.GroupVersion.Version, "")}
	for _, name := range OriaCRDs {
		out = append(out, crdVerdict(f, "oria", name, oriav1alpha1.GroupVersion.Version, f.PluginVersion))
	}
	out = append(out, webhookVerdicts(f)...)
	out = append(out, replicasVerdict(f), leaderVerdict(f), versionVerdict(f))
	return noNode(f, out)
}

// crdVerdict checks that a CRD is installed, established and serves
// version; with plugin set (oria's CRDs), it says at which oria version.
func crdVerdict(f *CheckFacts, check, name, version, plugin string) Verdict {
	v := Verdict{Check: check, Object: crdObject + name}
	fact := f.CRDs[name]
	install := "install oria's CRDs at the plugin's version: kubectl apply --server-side -f install.yaml (of the same release as the plugin)"
	if plugin == "" {
		install = "install OLM v1 (operator-controller) first: oria manages the RBAC of its ClusterExtensions"
	}
	switch {
	case fact.Err != nil:
		return verdictFailed(v, fmt.Sprintf("could not read CRD %s: %v", name, fact.Err), "run check as a user who may get customresourcedefinitions (a cluster admin)")
	case fact.CRD == nil:
		return verdictFailed(v, fmt.Sprintf("CRD %s is not installed", name), install)
	}
	crd := fact.CRD
	if !established(crd) {
		return verdictFailed(v, fmt.Sprintf("CRD %s is not established: the API server does not serve it", name), "kubectl describe crd "+name+" (its conditions say why)")
	}
	if !serves(crd, version) {
		return verdictFailed(v, fmt.Sprintf("CRD %s does not serve version %s (it serves %s)", name, version, strings.Join(servedVersions(crd), ", ")), install)
	}
	msg := fmt.Sprintf("CRD %s is established and serves %s", name, version)
	if plugin == "" {
		return verdictOK(v, msg)
	}
	// The version is compared once, for the whole install, in the versions
	// check: a plugin of another release is one cause, on one line.
	if have := crd.Labels[oriav1alpha1.LabelVersion]; have != "" {
		return verdictOK(v, msg+", at oria "+have)
	}
	return verdictOK(v, msg+" (no "+oriav1alpha1.LabelVersion+" label)")
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func serves(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served {
			return true
		}
	}
	return false
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// replicasVerdict checks that oria's replicas are ready.
func replicasVerdict(f *CheckFacts) Verdict {
	v := Verdict{Check: "replicas", Object: "deployment.apps/" + DeploymentName, Namespace: f.Namespace}
	where := fmt.Sprintf("Deployment %s/%s", f.Namespace, DeploymentName)
	inspect := fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s", f.Namespace, DeploymentName, f.Namespace, DeploymentName)
	d := f.Deployment
	switch {
	case f.DeploymentErr != nil:
		return verdictFailed(v, fmt.Sprintf("could not read %s: %v", where, f.DeploymentErr), "run check as a user who may get deployments in "+f.Namespace)
	case d == nil && OutsideURL(f) != "":
		return verdictSkipped(v, fmt.Sprintf("oria runs outside the cluster (the guard's webhook calls %s, not a Service), so there is no %s to check: the dry run shows that it serves the guard, the leader check that it reconciles",
			OutsideURL(f), where))
	case d == nil:
		return verdictFailed(v, fmt.Sprintf("no %s: oria is not installed in namespace %s", where, f.Namespace),
			"install oria (kubectl apply --server-side -f install.yaml), or name oria's namespace with -n")
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	ready := d.Status.ReadyReplicas
	closed := "the escalation guard fails closed: every create and update of oria's kinds is refused"
	switch {
	case want == 0:
		return verdictFailed(v, where+" is scaled to 0 replicas: "+closed, fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=2", f.Namespace, DeploymentName))
	case ready == 0:
		return verdictFailed(v, fmt.Sprintf("0 of %d replicas of %s are ready: %s", want, where, closed), inspect)
	case ready < want:
		return verdictWarning(v, fmt.Sprintf("%d of %d replicas of %s are ready", ready, want, where), inspect)
	case d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want:
		return verdictWarning(v, fmt.Sprintf("%d of %d replicas of %s are ready; a rollout is in progress (%d updated)", ready, want, where, d.Status.UpdatedReplicas),
			fmt.Sprintf("kubectl -n %s rollout status deployment %s", f.Namespace, DeploymentName))
	}
	return verdictOK(v, fmt.Sprintf("%d of %d replicas of %s are ready", ready, want, where))
}

// leaderVerdict checks that a replica holds the leader-election Lease and
// renews it.
func leaderVerdict(f *CheckFacts) Verdict {
	ns := cmp.Or(f.LeaseNamespace, f.Namespace)
	v := Verdict{Check: "leader", Object: "lease.coordination.k8s.io/" + LeaseName, Namespace: ns}
	where := fmt.Sprintf("Lease %s/%s", ns, LeaseName)
	logs := fmt.Sprintf("kubectl -n %s logs deployment/%s (leader election: oria runs with --leader-elect and POD_NAMESPACE=%s)", f.Namespace, DeploymentName, f.Namespace)
	outside := OutsideURL(f)
	if outside != "" && f.Deployment == nil {
		logs = fmt.Sprintf("see the log of the oria process that serves %s (make run prints it); run it with --leader-elect (make run does) to have it checked here", outside)
	}
	l := f.Lease
	switch {
	case f.LeaseErr != nil:
		return verdictFailed(v, fmt.Sprintf("could not read %s: %v", where, f.LeaseErr), "run check as a user who may get leases in "+ns)
	case l == nil && outside != "" && f.Deployment == nil:
		return verdictWarning(v, fmt.Sprintf("no Lease %s in %s or %s: the oria outside the cluster runs without --leader-elect, so whether it reconciles is not known from here",
			LeaseName, f.Namespace, OutsideLeaseNamespace), logs)
	case l == nil:
		return verdictFailed(v, "no "+where+": no replica has been elected leader, so nothing is reconciled", logs)
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		return verdictFailed(v, where+" is held by nobody: no replica leads, so nothing is reconciled", logs)
	}
	holder := *l.Spec.HolderIdentity
	if renewed, duration, ok := leaseTimes(l); ok && f.Now.Sub(renewed) > duration {
		return verdictFailed(v, fmt.Sprintf("%s is held by %s, but it was last renewed %s ago (it lasts %s): the leader stopped renewing it and no replica took over",
			where, holder, f.Now.Sub(renewed).Round(time.Second), duration), logs)
	}
	pod, _, _ := strings.Cut(holder, "_")
	if f.Deployment != nil && f.PodsErr == nil && !contains(f.Pods, pod) {
		return verdictWarning(v, fmt.Sprintf("%s is held by %s, which is not a pod of Deployment %s/%s: another oria process leads, and this install's replicas stand by",
			where, holder, f.Namespace, DeploymentName), "stop the other oria process (a `make run`, or an older install), or check that -n names the right namespace")
	}
	return verdictOK(v, fmt.Sprintf("%s is held by %s", where, holder))
}

// leaseTimes returns when a Lease was last renewed (or acquired) and how
// long it lasts; ok is false when it does not say.
func leaseTimes(l *coordinationv1.Lease) (time.Time, time.Duration, bool) {
	t := l.Spec.RenewTime
	if t == nil {
		t = l.Spec.AcquireTime
	}
	if t == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, 0, false
	}
	return t.Time, time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second, true
}

// released reports whether a plugin version is stamped (a release or
// make build), not Go's "(devel)" for an unstamped build.
func released(version string) bool {
	return version != "" && version != "(devel)"
}

func verdictOK(v Verdict, msg string) Verdict {
	v.Result, v.Message = CheckOK, msg
	return v
}

func verdictWarning(v Verdict, msg, fix string) Verdict {
	v.Result, v.Message, v.Fix = CheckWarning, msg, fix
	return v
}

func verdictFailed(v Verdict, msg, fix string) Verdict {
	v.Result, v.Message, v.Fix = CheckFailed, msg, fix
	return v
}

func verdictSkipped(v Verdict, msg string) Verdict {
	v.Result, v.Message = CheckSkipped, msg
	return v
}
