package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

func revokeCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	opts := RevokeOptions{DryRun: DryRunNone, Wait: DefaultWait}
	cmd := &cobra.Command{
		Use:   "revoke NAME [--reason TEXT] [--permanent] [--delete]",
		Short: "End a time-bound grant now: its spec.expiresAt becomes now, oria deletes its bindings, the policy stays as the record",
		Long: `Ends the grant of RBACPolicy NAME (or scopeinstance/NAME, a ScopeInstance of your own) now:
sets its spec.expiresAt to now (the plugin's clock, whole seconds), through the API server, with
the record of the revocation: who (you, as the API server authenticates you), when and why
(--reason), in the annotations oria.operatorframework.io/revoked-by, revoked-at and
revoke-reason; the guard refuses a record that names anyone else. Ending a grant only takes
away, so the escalation guard admits it for anyone who may patch the object, the grant's own
subject included, whatever else is wrong with it. oria deletes the bindings at once; revoke
waits (--wait, 30s by default; false or 0 does not) until oria reports the grant Expired, which
it does once the bindings are deleted. The object stays, Expired, with both records and its
events: kubectl oria status shows who granted and who revoked, when and why; a deletion would
lose that. A standing grant (no spec.expiresAt) is ended only with --permanent. --delete
deletes the object instead (its bindings go with it; no record is kept). A grant that has not
started yet (spec.notBefore ahead) cannot be ended by its window: delete it. NAME may be what
grant -o name printed.`,
		Example: `  kubectl oria revoke grant-alice-3f2a9c0b1d --reason "INC-1234 resolved"
  kubectl oria revoke team-a-standing-view --permanent
  kubectl oria grant alice --extension argocd --access edit -n team-a --for 2h -o name > grant.txt; kubectl oria revoke "$(cat grant.txt)"
  kubectl oria revoke grant-alice-3f2a9c0b1d --delete`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicies(cs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(dryRunModes, opts.DryRun) {
				return fmt.Errorf("--dry-run %q: want none, client or server", opts.DryRun)
			}
			obj, err := RevokeTarget(args[0])
			if err != nil {
				return err
			}
			c, err := cs.get()
			if err != nil {
				return err
			}
			if !opts.Delete && opts.DryRun != DryRunClient {
				if opts.By, err = WhoAmI(cmd.Context(), c); err != nil {
					return err
				}
			}
			dryRun := opts.DryRun
			res, err := Revoke(cmd.Context(), c, obj, opts)
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
	cmd.Flags().BoolVar(&opts.Delete, "delete", false, "Delete the object instead of ending its window (no record is kept).")
	cmd.Flags().BoolVar(&opts.Permanent, "permanent", false, "Also end a standing grant (one with no spec.expiresAt).")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why: recorded in the annotation "+oriav1alpha1.AnnotationRevokeReason+".")
	cmd.Flags().Var(waitFlag{&opts.Wait}, "wait", "How long to wait for oria to report the grant Expired (its bindings deleted); false or 0: do not wait.")
	cmd.Flags().Lookup("wait").NoOptDefVal = "true"
	cmd.Flags().StringVar(&opts.DryRun, "dry-run", DryRunNone, "none, server (the API server checks the change, the guard too, and stores nothing) or client.")
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
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	// What no server filled in is not printed: a policy to apply (never
	// stored: no resourceVersion) has no status, nor a creation time.
	if obj.GetResourceVersion() == "" {
		delete(u, "status")
	}
	if m, ok := u["metadata"].(map[string]any); ok && m["creationTimestamp"] == nil {
		delete(m, "creationTimestamp")
	}
	return p.PrintObj(&unstructured.Unstructured{Object: u}, streams.Out)
}
