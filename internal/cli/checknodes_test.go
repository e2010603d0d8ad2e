package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// noPodFacts is an install applied to a cluster where no pod runs: its
// Deployment has no ready replica, no Lease, the caBundle that oria's
// certificate management fills is empty, and the API server finds no
// endpoint for the guard.
func noPodFacts(nodes NodeFacts) *CheckFacts {
	f := healthyFacts()
	f.Nodes = nodes
	f.Deployment.Status.ReadyReplicas, f.Deployment.Status.UpdatedReplicas = 0, 0
	f.Lease = nil
	f.Webhooks[0].Webhooks[0].ClientConfig.CABundle = nil
	f.DryRunErr = errors.New(`Internal error occurred: failed calling webhook "` + GuardWebhookName +
		`": failed to call webhook: Post "https://oria-webhook-service.oria-system.svc:443/validate": no endpoints available for service "oria-webhook-service"`)
	return f
}

func resultLines(vs []Verdict) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Check+" "+v.Result)
	}
	return out
}

// TestVerdictsNoNode: on a cluster with no Ready node, the checks that
// need a running oria fail for one cause: one FAILED line says it (the
// nodes), the others are skipped as following from it. With a Ready node
// the same facts fail each on its own; a healthy install on a cluster
// whose nodes check cannot see is healthy.
func TestVerdictsNoNode(t *testing.T) {
	got := Verdicts(noPodFacts(NodeFacts{Read: true}))
	want := []string{"OLM v1 ok", "oria ok", "oria ok", "oria ok", "oria ok", "nodes failed", "webhook skipped", "certificate skipped", "dry run skipped",
		"replicas skipped", "leader skipped", "versions ok"}
	if d := cmp.Diff(want, resultLines(got)); d != "" {
		t.Errorf("no node (-want +got):\n%s", d)
	}
	text := CheckText(&CheckReport{Namespace: DefaultNamespace, PluginVersion: "v0.1.0", Verdicts: got})
	t.Log("\n" + text)
	for _, s := range []string{"FAILED   nodes: the cluster has no node: no pod can run", "Fix: add a node",
		"skipped  replicas: needs a node (no node is Ready, see the nodes line): 0 of 2 replicas", "skipped  leader: needs a node",
		"skipped  dry run: needs a node", "skipped  webhook: needs a node", "1 failed"} {
		if !strings.Contains(text, s) {
			t.Errorf("the text lacks %q", s)
		}
	}
	if got := Verdicts(noPodFacts(NodeFacts{Read: true, Total: 2})); got[5].Check != "nodes" || !strings.Contains(got[5].Message, "the cluster has 2 nodes and none is Ready") {
		t.Errorf("nodes, none Ready: %+v", got[5])
	}

	got = Verdicts(noPodFacts(NodeFacts{Read: true, Total: 1, Ready: 1}))
	want = []string{"OLM v1 ok", "oria ok", "oria ok", "oria ok", "oria ok", "webhook failed", "certificate skipped", "dry run failed", "replicas failed", "leader failed", "versions ok"}
	if d := cmp.Diff(want, resultLines(got)); d != "" {
		t.Errorf("a Ready node: each on its own (-want +got):\n%s", d)
	}
	// The nodes could not be read: each on its own too.
	if d := cmp.Diff(want, resultLines(Verdicts(noPodFacts(NodeFacts{Err: errors.New("forbidden")})))); d != "" {
		t.Errorf("nodes not read (-want +got):\n%s", d)
	}
	// Nothing fails for want of a pod (its status set by hand, say): no
	// nodes line.
	f := healthyFacts()
	f.Nodes = NodeFacts{Read: true}
	if d := cmp.Diff(resultLines(Verdicts(healthyFacts())), resultLines(Verdicts(f))); d != "" {
		t.Errorf("healthy, no node (-want +got):\n%s", d)
	}
	// Replicas ready (their status set by hand, no node): a stale Lease
	// is its own failure.
	f = healthyFacts()
	f.Nodes = NodeFacts{Read: true}
	f.Lease.Spec.RenewTime.Time = checkNow.Add(-time.Hour)
	if v := Verdicts(f); resultLines(v)[9] != "leader failed" {
		t.Errorf("a stale Lease, replicas ready, no node: %+v", v[9])
	}
	// Something answers at the Service's address (a proxy), but the
	// caBundle is empty: that follows from no pod too.
	f = noPodFacts(NodeFacts{Read: true})
	f.DryRunErr = errors.New(`Internal error occurred: failed calling webhook "` + GuardWebhookName + `": tls: failed to verify certificate: x509: certificate is valid for proxy.example.com`)
	if v := Verdicts(f); !slices.Contains(resultLines(v), "dry run skipped") {
		t.Errorf("an empty caBundle, no node: %v", resultLines(v))
	}
	// A guard that answers with a certificate the caBundle does not
	// verify is not waiting for a node.
	f = noPodFacts(NodeFacts{Read: true})
	f.Webhooks[0].Webhooks[0].ClientConfig.CABundle = testCA()
	f.DryRunErr = errors.New(`Internal error occurred: failed calling webhook "` + GuardWebhookName + `": tls: failed to verify certificate: x509: certificate signed by unknown authority`)
	if v := Verdicts(f); !slices.Contains(resultLines(v), "dry run failed") || !slices.Contains(resultLines(v), "nodes failed") {
		t.Errorf("a CA that does not match, no node: %v", resultLines(v))
	}
	// A failure of another cause stays a failure.
	f = noPodFacts(NodeFacts{Read: true})
	f.Deployment.Spec.Replicas = new(int32)
	if v := Verdicts(f); resultLines(v)[8] != "replicas failed" || !strings.Contains(v[8].Message, "scaled to 0") || slices.Contains(resultLines(v), "nodes failed") {
		t.Errorf("scaled to 0, no node: %+v", v)
	}
}
