package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// dryRunModes are the values of --dry-run, as kubectl's.
var dryRunModes = []string{DryRunNone, DryRunClient, DryRunServer}

// CreateGrant plans the policy as `kubectl oria plan` of it would (the guard's
// verdict on a server-side dry run, what it binds, the bindings created)
// and, unless it is refused or dryRun is server, creates it. A policy of
// that name must not exist: grant makes new grants.
func CreateGrant(ctx context.Context, c client.Client, p *oriav1alpha1.RBACPolicy, dryRun string) (*PlanReport, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(p), &oriav1alpha1.RBACPolicy{})
	switch {
	case err == nil:
		return nil, fmt.Errorf("RBACPolicy %q exists: grant makes a new grant; choose another --name, or leave it out for a generated one", p.Name)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading RBACPolicy %q: %w", p.Name, err)
	}
	report, err := PlanFile(ctx, c, []client.Object{p})
	if err != nil {
		return nil, err
	}
	if refused(report.Objects) > 0 {
		return report, answerNo("RBACPolicy %s REFUSED: not created", p.Name)
	}
	if dryRun == DryRunServer {
		return report, nil
	}
	gvk := p.GroupVersionKind()
	if err := c.Create(ctx, p, client.FieldOwner(FieldManager)); err != nil {
		return report, fmt.Errorf("creating RBACPolicy %q: %w", p.Name, err)
	}
	p.SetGroupVersionKind(gvk)
	return report, nil
}

func grantCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var opts GrantOptions
	dryRun := DryRunNone
	cmd := &cobra.Command{
		Use:   "grant [USER] [--group GROUP...] [--serviceaccount NAMESPACE/NAME...] --extension EXTENSION --access view|edit|admin (-n NAMESPACE... | --all-namespaces) (--for DURATION | --until TIME) [--reason TEXT]",
		Short: "Grant access to a ClusterExtension's APIs for a time (break-glass): an RBACPolicy that ends on its own",
		Long: `Creates an RBACPolicy that grants the subjects (USER, the --group and --serviceaccount ones) view,
edit or admin on the APIs of EXTENSION (all of them, or those --api names), in the namespaces of
-n (repeat it, or a comma-separated list) or cluster-wide (--all-namespaces), from now until
--for from now (2h, 90m, 3d) or --until an RFC 3339 time (spec.expiresAt, in whole seconds,
rounded down). --reason is recorded in the annotation oria.operatorframework.io/reason. The name
is grant-<first subject>-<hash>, or --name.

It first prints what kubectl oria plan prints for that policy: the escalation guard's verdict on a
server-side dry run of the create, as you (you may grant only what you could grant by hand), what
it binds, and the bindings oria would create. Refused, it creates nothing and exits 2. Then it
creates the policy through the API server, where the guard checks it again. At spec.expiresAt
oria deletes the bindings; the policy stays, Expired, as the record of the grant.
--dry-run=server plans and creates nothing; --dry-run=client prints the policy without reading
the cluster (-o yaml: a file to review, commit or apply later). -o name prints the policy's name
for kubectl get, or kubectl oria revoke.`,
		Example: `  kubectl oria grant alice --extension argocd --access edit -n team-a --for 2h --reason "INC-1234: sync stuck"
  kubectl oria grant --group sre --extension argocd --access admin --all-namespaces --until 2025-06-06T18:00:00Z
  kubectl oria grant --serviceaccount ci/deployer --extension argocd --access edit -n team-a,team-b --for 30m --dry-run=server
  kubectl oria grant alice --extension argocd --access view -n team-a --for 3d --dry-run=client -o yaml > grant.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.User = args[0]
			}
			if !slices.Contains(dryRunModes, dryRun) {
				return fmt.Errorf("--dry-run %q: want none, client or server", dryRun)
			}
			now := time.Now()
			p, err := opts.Policy(now)
			if err != nil {
				return err
			}
			var report *PlanReport
			if dryRun != DryRunClient {
				c, err := cs.get()
				if err != nil {
					return err
				}
				report, err = CreateGrant(cmd.Context(), c, p, dryRun)
				if report != nil && (*pf.OutputFormat == "" || *pf.OutputFormat == "wide") {
					if perr := output(pf, streams, view{header: PlanHeader(report), table: PlanTable(report.Changes)}); perr != nil {
						return perr
					}
				}
				if err != nil {
					return err
				}
			}
			return printWritten(pf, streams, p, "created", dryRun, grantSummary(p, now))
		},
	}
	cmd.Flags().StringArrayVar(&opts.Groups, "group", nil, "A group to grant to (repeat for several).")
	cmd.Flags().StringArrayVar(&opts.ServiceAccounts, "serviceaccount", nil, "A ServiceAccount to grant to, NAMESPACE/NAME (repeat for several).")
	cmd.Flags().StringVar(&opts.Extension, "extension", "", "The ClusterExtension whose APIs to grant.")
	cmd.Flags().StringVar(&opts.Access, "access", "", "The level granted: view, edit or admin.")
	// -n repeats here: it shadows kubectl's single --namespace.
	cmd.Flags().StringSliceVarP(&opts.Namespaces, "namespace", "n", nil, "A namespace to grant in (repeat, or a comma-separated list).")
	cmd.Flags().BoolVarP(&opts.AllNamespaces, "all-namespaces", "A", false, "Grant cluster-wide (a ClusterRoleBinding), instead of -n.")
	cmd.Flags().StringArrayVar(&opts.APIs, "api", nil, "Only this API of the extension, RESOURCE.GROUP (its CRD's name; repeat for several).")
	cmd.Flags().StringVar(&opts.For, "for", "", "How long the grant lasts from now: 2h, 90m, 1h30m, 3d.")
	cmd.Flags().StringVar(&opts.Until, "until", "", "When the grant ends, RFC 3339: 2025-06-06T18:00:00Z.")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why: recorded in the policy's annotation "+oriav1alpha1.AnnotationReason+".")
	cmd.Flags().StringVar(&opts.Name, "name", "", "The RBACPolicy's name (default grant-<first subject>-<hash>).")
	cmd.Flags().StringVar(&dryRun, "dry-run", DryRunNone, "none, server (plan, with the guard's verdict, and create nothing) or client (print the policy only).")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = DryRunClient
	_ = cmd.MarkFlagRequired("extension")
	_ = cmd.MarkFlagRequired("access")
	cmd.MarkFlagsMutuallyExclusive("namespace", "all-namespaces")
	cmd.MarkFlagsMutuallyExclusive("for", "until")
	_ = cmd.RegisterFlagCompletionFunc("extension", completeExtensions(cs))
	_ = cmd.RegisterFlagCompletionFunc("access", cobra.FixedCompletions(accessLevels, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("namespace", namespaceCompletion(cs))
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions(dryRunModes, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions([]string{"30m", "1h", "2h", "8h", "1d"}, cobra.ShellCompDirectiveNoFileComp))
	addPrintFlags(pf, cmd)
	return cmd
}

func revokeCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var del bool
	dryRun := DryRunNone
	wait := 30 * time.Second
	cmd := &cobra.Command{
		Use:   "revoke NAME [--delete]",
		Short: "End a time-bound grant now: its spec.expiresAt becomes now, oria deletes its bindings, the policy stays as the record",
		Long: `Ends the grant of RBACPolicy NAME (or scopeinstance/NAME, a ScopeInstance of your own) now:
sets its spec.expiresAt to now (the plugin's clock, whole seconds), through the API server. That
only takes away, so the escalation guard admits it for anyone who may patch the object, the
grant's own subject included, whatever else is wrong with it. oria deletes the bindings at once;
revoke waits (--wait, 30s by default; 0 does not) until oria reports the grant Expired, which it
does once the bindings are deleted. The object stays, Expired, with its reason and events: the
record of who was granted what, where and until when, which a deletion would lose. --delete
deletes it instead (its bindings go with it). A grant that has not started yet (spec.notBefore
ahead) cannot be ended by its window: delete it. NAME may be what grant -o name printed.`,
		Example: `  kubectl oria revoke grant-alice-3f2a9c0b1d
  kubectl oria grant alice --extension argocd --access edit -n team-a --for 2h -o name > grant.txt; kubectl oria revoke "$(cat grant.txt)"
  kubectl oria revoke grant-alice-3f2a9c0b1d --delete`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicies(cs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(dryRunModes, dryRun) {
				return fmt.Errorf("--dry-run %q: want none, client or server", dryRun)
			}
			obj, err := RevokeTarget(args[0])
			if err != nil {
				return err
			}
			c, err := cs.get()
			if err != nil {
				return err
			}
			res, err := Revoke(cmd.Context(), c, obj, del, dryRun, wait)
			if err != nil {
				return err
			}
			obj.GetObjectKind().SetGroupVersionKind(oriav1alpha1.GroupVersion.WithKind(kindOfObject(obj)))
			switch {
			case res.Deleted:
				return printWritten(pf, streams, obj, "deleted", dryRun, "")
			case res.Already != "":
				return printWritten(pf, streams, obj, "unchanged", DryRunNone, "the grant "+res.Already)
			}
			what := "spec.expiresAt " + binding.Stamp(res.ExpiresAt)
			if res.Confirmed > 0 {
				what += fmt.Sprintf("; Expired, its bindings deleted, %.1fs later", res.Confirmed.Seconds())
			}
			return printWritten(pf, streams, obj, "revoked", dryRun, what)
		},
	}
	cmd.Flags().BoolVar(&del, "delete", false, "Delete the object instead of ending its window (no record is kept).")
	cmd.Flags().DurationVar(&wait, "wait", wait, "How long to wait for oria to report the grant Expired (its bindings deleted); 0: do not wait.")
	cmd.Flags().StringVar(&dryRun, "dry-run", DryRunNone, "none, server (the API server checks the change, the guard too, and stores nothing) or client.")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = DryRunClient
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions(dryRunModes, cobra.ShellCompDirectiveNoFileComp))
	addPrintFlags(pf, cmd)
	return cmd
}

// printWritten prints the object grant or revoke wrote: kubectl's
// "<kind>.<group>/<name> <verb>" line (with " (server dry run)" or
// " (dry run)", and ": <what>" when said), -o name, or the object in the
// other -o formats.
func printWritten(pf *genericclioptions.PrintFlags, streams genericiooptions.IOStreams, obj client.Object, verb, dryRun, what string) error {
	name := resourceName(obj.GetObjectKind().GroupVersionKind().Kind) + "/" + obj.GetName()
	switch *pf.OutputFormat {
	case "", "wide":
		switch dryRun {
		case DryRunServer:
			verb += " (server dry run)"
		case DryRunClient:
			verb += " (dry run)"
		}
		if what != "" {
			verb += ": " + what
		}
		_, err := fmt.Fprintf(streams.Out, "%s %s\n", name, verb)
		return err
	case "name":
		_, err := fmt.Fprintln(streams.Out, name)
		return err
	}
	p, err := pf.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(obj, streams.Out)
}
