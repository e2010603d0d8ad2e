package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A cluster where no node is Ready (a control plane without a kubelet, as
// make local-up starts) runs no pod: oria's replicas never start, so no
// replica leads, the guard does not answer, and oria's certificate
// management never fills the webhook's caBundle. That is one cause, said
// once: a FAILED nodes line, and the lines that follow from it skipped.

// NodeFacts is what check read of the cluster's nodes (only for an install
// in the cluster: an oria outside it needs none).
type NodeFacts struct {
	// Read is set when the nodes were listed.
	Read  bool
	Total int
	Ready int
	Err   error
}

// readNodes counts the cluster's nodes and the Ready ones.
func readNodes(ctx context.Context, c client.Reader) NodeFacts {
	var list corev1.NodeList
	if err := c.List(ctx, &list); err != nil {
		return NodeFacts{Err: err}
	}
	n := NodeFacts{Read: true, Total: len(list.Items)}
	for _, node := range list.Items {
		if slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}) {
			n.Ready++
		}
	}
	return n
}

// noNode rewrites verdicts when oria is installed in a cluster where no
// node is Ready and none of its replicas is: a FAILED nodes verdict before
// the first check that needs a running oria and failed, and those checks
// skipped ("needs a node"). Otherwise verdicts are returned as they are
// (nodes matter only when no replica runs).
func noNode(f *CheckFacts, verdicts []Verdict) []Verdict {
	if f.Deployment == nil || !f.Nodes.Read || f.Nodes.Ready > 0 || !slices.ContainsFunc(verdicts, func(v Verdict) bool { return v.Check == "replicas" && needsPod(f, v) }) {
		// Nodes matter only when oria has no replica running; then
		// whatever else needs one follows from it.
		return verdicts
	}
	first := -1
	for i, v := range verdicts {
		if needsPod(f, v) {
			if first < 0 {
				first = i
			}
			verdicts[i] = verdictSkipped(Verdict{Check: v.Check, Object: v.Object, Namespace: v.Namespace},
				"needs a node (no node is Ready, see the nodes line): "+v.Message)
		}
	}
	if first < 0 {
		return verdicts
	}
	msg := fmt.Sprintf("the cluster has %d nodes and none is Ready", f.Nodes.Total)
	if f.Nodes.Total == 0 {
		msg = "the cluster has no node"
	}
	nodes := verdictFailed(Verdict{Check: "nodes", Object: "nodes"},
		msg+fmt.Sprintf(": no pod can run, so Deployment %s/%s has no replica to serve the guard or lead; the checks that need one are skipped", f.Namespace, DeploymentName),
		"add a node (kubectl get nodes; kubectl describe node NAME says why one is not Ready); a control plane without a kubelet (make local-up) runs no pod: run oria outside it with make run, or see the local smoke test in docs/operations.md")
	return slices.Insert(verdicts, first, nodes)
}

// needsPod reports whether a failed verdict follows from no oria pod
// running: no replica ready (the Deployment wants some), no leader, the
// guard's address not answering the dry run, the caBundle not filled.
func needsPod(f *CheckFacts, v Verdict) bool {
	if v.Result != CheckFailed {
		return false
	}
	switch v.Check {
	case "replicas":
		d := f.Deployment
		return f.DeploymentErr == nil && d != nil && (d.Spec.Replicas == nil || *d.Spec.Replicas > 0) && d.Status.ReadyReplicas == 0
	case "leader":
		return f.LeaseErr == nil
	case "dry run":
		// Nothing answered at the guard's address, or the API server
		// could not verify what did because the caBundle is not filled
		// yet. A certificate that the caBundle does not verify is its
		// own failure.
		msg := fmt.Sprint(f.DryRunErr)
		called := strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "failed to call webhook")
		return f.DryRunErr != nil && called && (strings.Contains(msg, "no endpoints available") || strings.Contains(msg, "connection refused") || !caBundlesFilled(f))
	case "webhook":
		for i := range f.Webhooks {
			cfg := &f.Webhooks[i]
			if v.Object == webhookObject+cfg.Name {
				wh := guardWebhook(cfg)
				return wh != nil && len(webhookProblems(wh)) == 0 && parseCABundle(wh.ClientConfig.CABundle) != nil
			}
		}
	}
	return false
}

// caBundlesFilled reports whether every configuration of the guard's
// webhook has a caBundle that parses.
func caBundlesFilled(f *CheckFacts) bool {
	for i := range f.Webhooks {
		if wh := guardWebhook(&f.Webhooks[i]); wh != nil && parseCABundle(wh.ClientConfig.CABundle) != nil {
			return false
		}
	}
	return true
}
