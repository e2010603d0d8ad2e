package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// oriaNamespace is oria's namespace: -n, else DefaultNamespace.
func (cs *clients) oriaNamespace() string {
	if cs.flags.Namespace != nil && *cs.flags.Namespace != "" {
		return *cs.flags.Namespace
	}
	return DefaultNamespace
}

func checkCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	cmd := &cobra.Command{
		Use:   "check [-n NAMESPACE]",
		Short: "Is oria's install healthy? One line per check, with the fix; exit code 2 when a check fails",
		Long: `Checks oria's install, one line per verdict (ok, warning, FAILED, skipped), each not ok with its fix:
- OLM v1's ClusterExtension CRD is installed, established and serves v1;
- oria's CRDs are installed, established, serve v1alpha1, and are at the plugin's version (the
  ` + "app.kubernetes.io/version" + ` label the installer stamps; "unknown", a warning, without it);
- the escalation guard's ValidatingWebhookConfiguration sends every create and update of oria's
  kinds to the guard, fails closed and has a caBundle; when the guard is served at a URL the plugin
  can reach, the certificate it serves is verified with the caBundle (behind a Service only the API
  server reaches it, and this is skipped); a server-side dry-run create of a ScopeTemplate that
  grants nothing goes through the guard (admitted, the API server called it and verified its
  certificate);
- oria's Deployment (-n, default ` + DefaultNamespace + `) has its replicas ready, and one of its
  pods holds the leader-election Lease ` + LeaseName + ` and renews it;
- the plugin and the server (the version label of the Deployment's pods, else its image tag,
  else the version label of oria's CRDs) are the same version: a plugin of another release is
  one line, with its fix.
An oria that runs outside the cluster (make run: the guard's webhook has a URL, not a Service,
and there is no Deployment) is checked for what applies: the webhook, the certificate served at
the URL, the dry run, and the Lease (in -n's namespace, else ` + OutsideLeaseNamespace + `, where oria
holds it outside a pod); its replicas are not.
Exit code: 0 when nothing failed (warnings included), 2 when a check failed, 1 when the check could
not run. -o name lists the objects of the checks that are not ok.`,
		Example: `  kubectl oria check
  kubectl oria check -n my-oria-namespace
  kubectl oria check -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cs.get()
			if err != nil {
				return err
			}
			f, err := ReadCheck(cmd.Context(), c, cs.oriaNamespace(), BuildVersion().Version)
			if err != nil {
				return err
			}
			report := &CheckReport{Namespace: f.Namespace, Outside: OutsideURL(f), PluginVersion: f.PluginVersion, Verdicts: Verdicts(f)}
			report.ServerVersion, _ = serverVersion(f)
			var names []string
			for _, v := range report.Verdicts {
				if v.Result != CheckOK && v.Result != CheckSkipped && v.Object != "" {
					names = appendNew(names, v.Object)
				}
			}
			if err := output(pf, streams, view{header: CheckText(report), table: emptyTable(), names: names, kind: "CheckReport", body: report}); err != nil {
				return err
			}
			if n := countResult(report.Verdicts, CheckFailed); n > 0 {
				return answerNo("%d of %d checks failed", n, len(report.Verdicts))
			}
			return nil
		},
	}
	addPrintFlags(pf, cmd)
	return cmd
}

// CheckText is the check's report as text: one line per verdict, then the
// counts.
func CheckText(r *CheckReport) string {
	var b strings.Builder
	for _, v := range r.Verdicts {
		label := map[string]string{CheckOK: "ok", CheckWarning: "warning", CheckFailed: "FAILED", CheckSkipped: "skipped"}[v.Result]
		fmt.Fprintf(&b, "%-8s %s: %s", label, v.Check, v.Message)
		if v.Fix != "" {
			fmt.Fprintf(&b, ". Fix: %s", v.Fix)
		}
		b.WriteString("\n")
	}
	server := r.ServerVersion
	if server == "" {
		server = "unknown"
	}
	where := "oria in namespace " + r.Namespace
	if r.Outside != "" {
		where = "oria outside the cluster, its guard at " + r.Outside
	}
	fmt.Fprintf(&b, "\n%d ok, %s, %d failed, %d skipped (%s; plugin %s, server %s)\n",
		countResult(r.Verdicts, CheckOK), plural(countResult(r.Verdicts, CheckWarning), "warning"), countResult(r.Verdicts, CheckFailed), countResult(r.Verdicts, CheckSkipped),
		where, r.PluginVersion, server)
	return b.String()
}

// emptyTable is the table of a view that prints only its header.
func emptyTable() *metav1.Table { return &metav1.Table{} }

func countResult(vs []Verdict, result string) int {
	n := 0
	for _, v := range vs {
		if v.Result == result {
			n++
		}
	}
	return n
}
