package cli

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

const webhookObject = "validatingwebhookconfiguration.admissionregistration.k8s.io/"

// webhookVerdicts checks the escalation guard: its configuration, the
// certificate it serves against the caBundle (when the plugin can reach
// it), and a server-side dry run through it.
func webhookVerdicts(f *CheckFacts) []Verdict {
	v := Verdict{Check: "webhook"}
	install := "apply the install (kubectl apply --server-side -f install.yaml), which creates ValidatingWebhookConfiguration oria-escalation-guard"
	switch {
	case f.WebhooksErr != nil:
		return []Verdict{verdictFailed(v, fmt.Sprintf("could not list ValidatingWebhookConfigurations: %v", f.WebhooksErr),
			"run check as a user who may list validatingwebhookconfigurations (a cluster admin)")}
	case len(f.Webhooks) == 0:
		return []Verdict{verdictFailed(v, "no ValidatingWebhookConfiguration has the webhook "+GuardWebhookName+
			": the escalation guard is not installed, so whoever may write oria's kinds may grant any role through oria", install)}
	}
	var out []Verdict
	covered := false
	for i := range f.Webhooks {
		cfg := &f.Webhooks[i]
		wh := guardWebhook(cfg)
		covered = covered || callsGuard(wh)
		out = append(out, webhookConfigVerdict(f, cfg, wh), certificateVerdict(f, cfg, wh))
	}
	if len(f.Webhooks) > 1 {
		var names []string
		for _, cfg := range f.Webhooks {
			names = append(names, cfg.Name)
		}
		out = append(out, verdictWarning(v, fmt.Sprintf("%d ValidatingWebhookConfigurations have the webhook %s: %s", len(names), GuardWebhookName, strings.Join(names, ", ")),
			"delete the ones a former install left behind: every one of them is called, and each fails closed"))
	}
	return append(out, dryRunVerdict(f, covered))
}

// guardWebhook returns the guard's webhook in cfg.
func guardWebhook(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) *admissionregistrationv1.ValidatingWebhook {
	for i := range cfg.Webhooks {
		if cfg.Webhooks[i].Name == GuardWebhookName {
			return &cfg.Webhooks[i]
		}
	}
	return nil
}

// webhookConfigVerdict checks that the guard's webhook is called for every
// create and update of oria's kinds, fails closed, and has a caBundle.
func webhookConfigVerdict(f *CheckFacts, cfg *admissionregistrationv1.ValidatingWebhookConfiguration, wh *admissionregistrationv1.ValidatingWebhook) Verdict {
	v := Verdict{Check: "webhook", Object: webhookObject + cfg.Name}
	reinstall := "apply the install again (kubectl apply --server-side -f install.yaml): it sets the webhook as oria needs it"
	if problems := webhookProblems(wh); len(problems) > 0 {
		return verdictFailed(v, fmt.Sprintf("ValidatingWebhookConfiguration %s: %s", cfg.Name, strings.Join(problems, "; ")), reinstall)
	}
	if err := parseCABundle(wh.ClientConfig.CABundle); err != nil {
		return verdictFailed(v, fmt.Sprintf("ValidatingWebhookConfiguration %s: %v: the API server cannot verify the guard's certificate", cfg.Name, err),
			fmt.Sprintf("oria's certificate management (or cert-manager's CA injector, with config/certmanager) fills the caBundle: check that it runs (kubectl -n %s logs deployment/%s)", f.Namespace, DeploymentName))
	}
	return verdictOK(v, fmt.Sprintf("ValidatingWebhookConfiguration %s sends every create and update of oria's kinds to the guard, fails closed, and has a caBundle", cfg.Name))
}

// webhookProblems lists what in the guard's webhook lets a write of
// oria's kinds skip it.
func webhookProblems(wh *admissionregistrationv1.ValidatingWebhook) []string {
	var problems []string
	for _, r := range []string{"scopetemplates", "scopeinstances", "rbacpolicies", "accessrequests"} {
		for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update} {
			if !ruleCovers(wh.Rules, r, op) {
				problems = append(problems, fmt.Sprintf("its rules do not cover %s of %s", op, r))
			}
		}
	}
	if wh.FailurePolicy != nil && *wh.FailurePolicy != admissionregistrationv1.Fail {
		problems = append(problems, fmt.Sprintf("failurePolicy is %s: while oria is down, writes are admitted unchecked", *wh.FailurePolicy))
	}
	if wh.ObjectSelector != nil && (len(wh.ObjectSelector.MatchLabels) > 0 || len(wh.ObjectSelector.MatchExpressions) > 0) {
		problems = append(problems, "an objectSelector lets objects with the right labels skip it")
	}
	if len(wh.MatchConditions) > 0 {
		problems = append(problems, "matchConditions let some requests skip it")
	}
	return problems
}

// callsGuard reports whether the API server must have the guard's answer
// to admit the dry run's ScopeTemplate create: the webhook's rules send it
// there, for every object, and an unreachable guard refuses it.
func callsGuard(wh *admissionregistrationv1.ValidatingWebhook) bool {
	return ruleCovers(wh.Rules, "scopetemplates", admissionregistrationv1.Create) && (wh.FailurePolicy == nil || *wh.FailurePolicy == admissionregistrationv1.Fail) &&
		(wh.ObjectSelector == nil || len(wh.ObjectSelector.MatchLabels)+len(wh.ObjectSelector.MatchExpressions) == 0) && len(wh.MatchConditions) == 0
}

// ruleCovers reports whether rules send op on resource of oria's group and
// version to the webhook.
func ruleCovers(rules []admissionregistrationv1.RuleWithOperations, resource string, op admissionregistrationv1.OperationType) bool {
	has := func(list []string, s string) bool { return slices.Contains(list, s) || slices.Contains(list, "*") }
	for _, r := range rules {
		if has(r.APIGroups, oriav1alpha1.GroupVersion.Group) && has(r.APIVersions, oriav1alpha1.GroupVersion.Version) && has(r.Resources, resource) &&
			(slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)) {
			return true
		}
	}
	return false
}

// parseCABundle checks that a caBundle holds at least one certificate.
func parseCABundle(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("its caBundle is empty")
	}
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("its caBundle holds a certificate that does not parse: %w", err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("its caBundle holds no PEM certificate")
	}
	return nil
}

// certificateVerdict compares the certificate the guard serves with the
// caBundle, when the guard is served at a URL the plugin reached.
func certificateVerdict(f *CheckFacts, cfg *admissionregistrationv1.ValidatingWebhookConfiguration, wh *admissionregistrationv1.ValidatingWebhook) Verdict {
	v := Verdict{Check: "certificate", Object: webhookObject + cfg.Name}
	if s := wh.ClientConfig.Service; s != nil {
		return verdictSkipped(v, fmt.Sprintf("the guard is served behind Service %s/%s, which only the API server reaches: its certificate is not compared with the caBundle from here (the dry run shows whether the API server verifies it)",
			s.Namespace, s.Name))
	}
	served, found := f.Served[cfg.Name]
	switch {
	case !found:
		return verdictSkipped(v, "the guard's URL was not contacted")
	case served.Err != nil:
		return verdictWarning(v, fmt.Sprintf("could not reach %s from here: %v (the dry run shows whether the API server can)", served.URL, served.Err),
			"run check where the webhook's URL is reachable to compare its certificate with the caBundle")
	case served.VerifyErr != nil:
		return verdictFailed(v, fmt.Sprintf("%s serves a certificate (%s) that the caBundle of %s does not verify: %v", served.URL, served.Subject, cfg.Name, served.VerifyErr),
			"the caBundle and the serving certificate come from different CAs: put the CA that signed oria's serving certificate in the caBundle (oria's certificate management or cert-manager's CA injector does so), then restart oria if it serves an old certificate")
	}
	msg := fmt.Sprintf("%s serves %s, valid until %s, which the caBundle verifies", served.URL, served.Subject, served.NotAfter.UTC().Format("2006-01-02 15:04 MST"))
	if left := served.NotAfter.Sub(f.Now); left < 0 {
		return verdictFailed(v, msg+", but it has expired", "restart oria so that it serves its renewed certificate")
	}
	return verdictOK(v, msg)
}

// dryRunVerdict judges the server-side dry run: covered is whether the API
// server must have had the guard's answer to admit it (callsGuard).
func dryRunVerdict(f *CheckFacts, covered bool) Verdict {
	v := Verdict{Check: "dry run"}
	if len(f.Webhooks) > 0 {
		v.Object = webhookObject + f.Webhooks[0].Name
	}
	probe := "a server-side dry-run create of " + f.DryRunObject
	err := f.DryRunErr
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	denied := `admission webhook "` + GuardWebhookName + `" denied the request`
	switch {
	case f.DryRunObject == "":
		return verdictSkipped(v, "no dry run was made")
	case err == nil && covered:
		return verdictOK(v, probe+" was admitted by the guard: the API server called it over TLS and verified its certificate with the caBundle (failurePolicy Fail would have refused it otherwise)")
	case err == nil:
		return verdictWarning(v, probe+" was admitted, which does not show that the guard answered: the webhook configuration does not send it there, or fails open",
			"see the webhook check above")
	case strings.Contains(msg, denied):
		return verdictOK(v, probe+" was answered by the guard (it refused it: "+msg+")")
	case strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "failed to call webhook"):
		return verdictFailed(v, probe+" failed: the API server could not call the guard: "+msg, webhookCallFix(f, msg))
	case apierrors.IsForbidden(err):
		return verdictFailed(v, probe+" was forbidden before it reached the guard: "+msg, "run check as a user who may create scopetemplates (a dry run writes nothing), e.g. a cluster admin")
	}
	return verdictFailed(v, probe+" failed: "+msg, fmt.Sprintf("kubectl -n %s logs deployment/%s", f.Namespace, DeploymentName))
}

// webhookCallFix says what to do about a webhook call that failed, from
// the API server's message.
func webhookCallFix(f *CheckFacts, msg string) string {
	switch {
	case strings.Contains(msg, "x509") || strings.Contains(msg, "certificate"):
		return "the caBundle does not verify the certificate the guard serves: put the CA that signed oria's serving certificate in the caBundle (oria's certificate management or cert-manager's CA injector does so), then restart oria if it serves an old certificate"
	case strings.Contains(msg, "no endpoints available") || strings.Contains(msg, "connection refused") || strings.Contains(msg, "not found"):
		return fmt.Sprintf("no oria replica serves the guard: see the replicas check, and kubectl -n %s get pods,endpointslices", f.Namespace)
	case strings.Contains(msg, "deadline") || strings.Contains(msg, "timeout") || strings.Contains(msg, "Timeout"):
		return fmt.Sprintf("the guard did not answer in time: check the network between the API server and oria's pods, and kubectl -n %s logs deployment/%s", f.Namespace, DeploymentName)
	}
	return fmt.Sprintf("kubectl -n %s logs deployment/%s", f.Namespace, DeploymentName)
}
