package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// dryRunModes are the values of --dry-run, as kubectl's.
var dryRunModes = []string{DryRunNone, DryRunClient, DryRunServer}

// CreateGrant plans the policy as `kubectl oria plan` of it would (the guard's
// verdict on a server-side dry run, what it binds, the bindings created,
// and, with a ceiling, the dry runs of those bindings as its
// ServiceAccount through ceilings) and, unless it is refused or dryRun is
// server, creates it. A grant whose ceiling refuses every binding is
// refused too (ceilingRefusal). A policy of that name must not exist:
// grant makes new grants.
func CreateGrant(ctx context.Context, c client.Client, p *oriav1alpha1.RBACPolicy, dryRun string, ceilings ...Impersonator) (*PlanReport, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(p), &oriav1alpha1.RBACPolicy{})
	switch {
	case err == nil:
		return nil, fmt.Errorf("RBACPolicy %q exists: grant makes a new grant; choose another --name, or leave it out for a generated one", p.Name)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading RBACPolicy %q: %w", p.Name, err)
	}
	report, err := PlanFile(ctx, c, []client.Object{p}, ceilings...)
	if err != nil {
		return nil, err
	}
	if refused(report.Objects) > 0 {
		return report, answerNo("RBACPolicy %s REFUSED: not created", p.Name)
	}
	if why := ceilingRefusal(p, report); why != "" {
		return report, answerNo("RBACPolicy %s REFUSED: not created: %s", p.Name, why)
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
	wait := DefaultWait
	cmd := &cobra.Command{
		Use:   "grant [USER] [--group GROUP...] [--serviceaccount NAMESPACE/NAME...] --extension EXTENSION --access view|edit|admin (-n NAMESPACE... | --all-namespaces) (--for DURATION | --until TIME) [--reason TEXT]",
		Short: "Grant access to a ClusterExtension's APIs for a time (break-glass): an RBACPolicy that ends on its own",
		Long: `Creates an RBACPolicy that grants the subjects (USER, the --group and --serviceaccount ones) view,
edit or admin on the APIs of EXTENSION (all of them, or those --api names), in the namespaces of
-n (repeat it, or a comma-separated list) or cluster-wide (--all-namespaces), from now until
--for from now (2h, 90m, 1h30m, 3d, 1w) or --until an RFC 3339 time (spec.expiresAt, in whole
seconds, rounded down), at most 90 days. The record of the grant is kept on the policy: who (you,
as the API server authenticates you), when, and why (--reason), in the annotations
oria.operatorframework.io/granted-by, granted-at and reason; the guard refuses a record that
names anyone else, and kubectl oria status shows it. The name is grant-<first subject>-<hash>, or
--name.

A grant that would grant nothing is REFUSED, exit code 2, nothing created: a ClusterExtension that
does not exist or is not in FineGrained or Legacy mode, an --api the extension does not provide, a
cluster-scoped API in namespaces (a RoleBinding cannot grant it: use --all-namespaces), or no
namespace of -n that exists, or a --ceiling ServiceAccount that may write none of its bindings
(a server-side dry run of each, as that ServiceAccount, as oria writes them). What it would leave
out (a missing namespace among others, a cluster-scoped API among namespaced ones, bindings the
ceiling refuses) is noted on standard error.

It then prints what kubectl oria plan prints for that policy: the escalation guard's verdict on a
server-side dry run of the create, as you (you may grant only what you could grant by hand), what
it binds, and the bindings oria would create. Refused, it creates nothing and exits 2. Then it
creates the policy through the API server, where the guard checks it again, and waits (--wait,
30s by default; false or 0 does not) until oria reports it Bound, and prints what was granted
where ("granted"), or what of it was not ("granted in part"); a policy oria reports granting
nothing is an error (exit 1), and so is no report within --wait. At spec.expiresAt oria deletes
the bindings; the policy stays, Expired, as the record of the grant.
--dry-run=server plans and creates nothing; --dry-run=client prints the policy without reading
the cluster (-o yaml: a file to review, commit or apply later; it records no granted-by, since
whoever applies it is the granter). -o name prints the policy's name for kubectl get, or
kubectl oria revoke.`,
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
			if err != nil || dryRun == DryRunClient {
				if err != nil {
					return err
				}
				return printWritten(pf, streams, p, "created", dryRun, grantSummary(p, now))
			}
			c, err := cs.get()
			if err != nil {
				return err
			}
			imp, err := ceilingClients(cs)
			if err != nil {
				return err
			}
			return runGrant(cmd.Context(), c, imp, streams, pf, opts, dryRun, wait)
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
	cmd.Flags().StringVar(&opts.For, "for", "", "How long the grant lasts from now: 2h, 90m, 1h30m, 3d, 1w (at most "+maxGrantText+").")
	cmd.Flags().StringVar(&opts.Until, "until", "", "When the grant ends, RFC 3339: 2025-06-06T18:00:00Z (at most "+maxGrantText+" from now).")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why: recorded in the policy's annotation "+oriav1alpha1.AnnotationReason+".")
	cmd.Flags().StringVar(&opts.Name, "name", "", "The RBACPolicy's name (default grant-<first subject>-<hash>).")
	cmd.Flags().StringVar(&opts.Ceiling, "ceiling", "", "A ServiceAccount, NAMESPACE/NAME, that oria writes the bindings as (spec.serviceAccount): the grant is at most what it may grant.")
	cmd.Flags().StringVar(&dryRun, "dry-run", DryRunNone, "none, server (plan, with the guard's verdict, and create nothing) or client (print the policy only).")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = DryRunClient
	cmd.Flags().Var(waitFlag{&wait}, "wait", "How long to wait for oria to report the grant Bound (a duration; false or 0: do not wait).")
	cmd.Flags().Lookup("wait").NoOptDefVal = "true"
	_ = cmd.MarkFlagRequired("extension")
	_ = cmd.MarkFlagRequired("access")
	cmd.MarkFlagsMutuallyExclusive("namespace", "all-namespaces")
	cmd.MarkFlagsMutuallyExclusive("for", "until")
	_ = cmd.RegisterFlagCompletionFunc("extension", completeExtensions(cs))
	_ = cmd.RegisterFlagCompletionFunc("access", cobra.FixedCompletions(accessLevels, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("namespace", namespaceCompletion(cs))
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions(dryRunModes, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions([]string{"30m", "1h", "2h", "8h", "1d", "1w"}, cobra.ShellCompDirectiveNoFileComp))
	addPrintFlags(pf, cmd)
	return cmd
}

// runGrant grants what opts say on c, from now: it records who (WhoAmI),
// refuses a grant that would grant nothing (CheckGrant), plans and creates
// it (CreateGrant), then waits up to wait for oria to report it Bound and
// says what was granted where.
func runGrant(ctx context.Context, c client.Client, imp Impersonator, streams genericiooptions.IOStreams, pf *genericclioptions.PrintFlags, opts GrantOptions, dryRun string, wait time.Duration) error {
	user, err := WhoAmI(ctx, c)
	if err != nil {
		return err
	}
	opts.GrantedBy = user
	now := time.Now()
	p, err := opts.Policy(now)
	if err != nil {
		return err
	}
	check, err := CheckGrant(ctx, c, p)
	if err != nil {
		return err
	}
	if len(check.Refusals) > 0 {
		return answerNo("RBACPolicy %s REFUSED: not created: it would grant nothing: %s", p.Name, strings.Join(check.Refusals, "; "))
	}
	table := *pf.OutputFormat == "" || *pf.OutputFormat == "wide"
	report, err := CreateGrant(ctx, c, p, dryRun, imp)
	if report != nil && table {
		if perr := output(pf, streams, view{header: PlanHeader(report), table: PlanTable(report.Changes)}); perr != nil {
			return perr
		}
	}
	for _, n := range check.Notes {
		fmt.Fprintf(streams.ErrOut, "Note: %s\n", n)
	}
	if report != nil && err == nil {
		if n := ceilingPartial(report); n != "" {
			fmt.Fprintf(streams.ErrOut, "Note: %s\n", n)
		}
	}
	if err != nil {
		return err
	}
	if dryRun == DryRunServer || wait <= 0 {
		return printWritten(pf, streams, p, "created", dryRun, grantSummary(p, now))
	}
	gvk := p.GroupVersionKind()
	outcome, took, err := WaitGranted(ctx, c, p, wait)
	p.SetGroupVersionKind(gvk)
	if err != nil {
		return err
	}
	ready := meta.FindStatusCondition(p.Status.Conditions, oriav1alpha1.TypeReady)
	switch outcome {
	case GrantBound:
		return printWritten(pf, streams, p, "granted", dryRun, fmt.Sprintf("%s; Bound %.1fs after its creation", grantedSummary(p, time.Now(), check.LeftOut), took.Seconds()))
	case GrantPartial:
		return printWritten(pf, streams, p, "granted in part", dryRun, fmt.Sprintf("%s; NOT all of it: %s: %s", grantedSummary(p, time.Now(), check.LeftOut), ready.Reason, ready.Message))
	}
	return fmt.Errorf("RBACPolicy %q was created, but oria reports it grants nothing: %s: %s; end it: kubectl oria revoke %s --delete", p.Name, ready.Reason, ready.Message, p.Name)
}
