package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
	"github.com/operator-framework/oria/internal/record"
)

// requestCommands are eligible access's commands: request, approve, deny,
// end and requests.
func requestCommands(cs *clients, streams genericiooptions.IOStreams) []*cobra.Command {
	return []*cobra.Command{requestCommand(cs, streams), decideCommand(cs, streams, "approve", eligibility.Approval, false),
		decideCommand(cs, streams, "deny", eligibility.Denial, true), decideCommand(cs, streams, "end", eligibility.End, false),
		requestsCommand(cs, streams)}
}

func requestCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	var opts RequestOptions
	wait := time.Duration(0)
	cmd := &cobra.Command{
		Use:   "request --extension EXTENSION --access view|edit|admin -n NAMESPACE... --for DURATION [--reason TEXT] [--wait[=DURATION]]",
		Short: "Ask for eligible access for a while: an AccessRequest, approved by someone else",
		Long: `Creates an AccessRequest for you (as the API server authenticates you) to activate an eligible
RBACPolicy of EXTENSION at ACCESS (or --policy) in the namespaces of -n, for --for (at most the
policy's eligibility.maxDuration), with --reason. You must be one of the policy's subjects, as a
user or through a group you are in. It prints the request; with --wait it waits (30s by default)
until it is approved and the grant Bound.`,
		Example: `  kubectl oria request --extension argocd --access edit -n team-a --for 1h --reason "INC-1234: sync stuck" --wait=10m`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cs.get()
			if err != nil {
				return err
			}
			return runRequest(cmd.Context(), c, streams, opts, wait)
		},
	}
	cmd.Flags().StringVar(&opts.Extension, "extension", "", "The ClusterExtension whose APIs to request.")
	cmd.Flags().StringVar(&opts.Access, "access", "", "The level: view, edit or admin.")
	cmd.Flags().StringVar(&opts.Policy, "policy", "", "The eligible RBACPolicy, instead of --extension and --access.")
	cmd.Flags().StringSliceVarP(&opts.Namespaces, "namespace", "n", nil, "A namespace (repeat, or a comma-separated list).")
	cmd.Flags().StringVar(&opts.For, "for", "", "How long, once approved: 30m, 1h, 4h.")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why (spec.reason).")
	cmd.Flags().StringVar(&opts.Name, "name", "", "The AccessRequest's name (default req-<you>-<hash>).")
	cmd.Flags().Var(waitFlag{&wait}, "wait", "How long to wait for approval and Bound (a duration; false or 0: do not wait).")
	cmd.Flags().Lookup("wait").NoOptDefVal = "true"
	_ = cmd.MarkFlagRequired("namespace")
	_ = cmd.MarkFlagRequired("for")
	return cmd
}

// runRequest creates the request of opts, prints it, and waits up to wait
// for it to be Active and Bound.
func runRequest(ctx context.Context, c client.Client, streams genericiooptions.IOStreams, opts RequestOptions, wait time.Duration) error {
	if opts.Policy == "" && (opts.Extension == "" || opts.Access == "") {
		return fmt.Errorf("name the eligible access: --extension and --access, or --policy")
	}
	me, err := Me(ctx, c)
	if err != nil {
		return err
	}
	var policies oriav1alpha1.RBACPolicyList
	if err := c.List(ctx, &policies); err != nil {
		return fmt.Errorf("listing RBACPolicies: %w", err)
	}
	p, as, err := ChoosePolicy(policies.Items, opts, me)
	if err != nil {
		return answerNo("%v", err)
	}
	r, err := opts.Request(p, as, me, time.Now())
	if err != nil {
		return err
	}
	if err := c.Create(ctx, r, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("creating AccessRequest %q: %w", r.Name, err)
	}
	fmt.Fprintf(streams.Out, "accessrequest.oria.operatorframework.io/%s requested: %s access of RBACPolicy %s for %s (as %s %s) in %v for %v: %s\n",
		r.Name, p.Spec.Access, p.Name, me.Name, as.Kind, as.Name, r.Spec.Namespaces, r.Spec.Duration.Duration, r.Spec.Reason)
	if wait <= 0 {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		cur := &oriav1alpha1.AccessRequest{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(r), cur); err != nil {
			return fmt.Errorf("reading AccessRequest %q: %w", r.Name, err)
		}
		active := meta.FindStatusCondition(cur.Status.Conditions, oriav1alpha1.TypeActive)
		switch {
		case active != nil && active.Status == metav1.ConditionTrue:
			fmt.Fprintf(streams.Out, "accessrequest.oria.operatorframework.io/%s Bound: approved by %s, in force from %s until %s in %v\n",
				r.Name, cur.Status.ApprovedBy, stampOrDash(cur.Status.StartsAt), stampOrDash(cur.Status.EndsAt), cur.Status.Namespaces)
			return nil
		case eligibility.Final(cur.Status.State):
			return answerNo("AccessRequest %s is %s: %s", r.Name, cur.Status.State, active.Message)
		case time.Now().After(deadline):
			return fmt.Errorf("AccessRequest %q is still %s after %v", r.Name, cur.Status.State, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// decideCommand is approve, deny or end: a patch of the request that
// writes the decision's record, by you, now.
func decideCommand(cs *clients, streams genericiooptions.IOStreams, verb string, k record.Keys, needReason bool) *cobra.Command {
	var reason string
	short := map[string]string{
		"approve": "Approve an AccessRequest (you must be an approver of its policy, and not its requester)",
		"deny":    "Deny an AccessRequest, saying why (you must be an approver of its policy, and not its requester)",
		"end":     "End an AccessRequest: cancel it while it waits, or end its grant early (its requester, an approver or a cluster admin)",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " REQUEST [--reason TEXT]",
		Short: short,
		Long: short + `. The record is written in the request's annotations
(oria.operatorframework.io/` + verb + `...-by, -at, reason) as you, as the API server authenticates you;
the escalation guard refuses it otherwise, naming why.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if needReason && reason == "" {
				return fmt.Errorf("%s needs --reason", verb)
			}
			c, err := cs.get()
			if err != nil {
				return err
			}
			me, err := Me(cmd.Context(), c)
			if err != nil {
				return err
			}
			patch, err := json.Marshal(Decision(k, me.Name, reason, time.Now()))
			if err != nil {
				return err
			}
			r := &oriav1alpha1.AccessRequest{}
			r.Name = args[0]
			if err := c.Patch(cmd.Context(), r, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
				return fmt.Errorf("%s AccessRequest %q: %w", verb, args[0], err)
			}
			fmt.Fprintf(streams.Out, "accessrequest.oria.operatorframework.io/%s %s by %s\n", r.Name, map[string]string{"approve": "approved", "deny": "denied", "end": "ended"}[verb], me.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "Why (recorded in annotation "+k.Reason+").")
	return cmd
}

func requestsCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var pending, active, all bool
	cmd := &cobra.Command{
		Use:   "requests [--pending|--active|--all]",
		Short: "List AccessRequests: who, what, where, until when, approved by whom, why",
		Long: `Lists the AccessRequests, oldest first: requester, policy, namespaces, duration, state, who
approved, when the grant starts and ends, the reason (-o wide: who ended it, and the Active
condition). By default the pending and active ones; --all lists every one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cs.get()
			if err != nil {
				return err
			}
			var list oriav1alpha1.AccessRequestList
			if err := c.List(cmd.Context(), &list); err != nil {
				return fmt.Errorf("listing AccessRequests: %w", err)
			}
			f := RequestsAll
			switch {
			case pending:
				f = RequestsPending
			case active:
				f = RequestsActive
			case !all:
				var open []oriav1alpha1.AccessRequest
				for _, r := range list.Items {
					if !eligibility.Final(r.Status.State) {
						open = append(open, r)
					}
				}
				list.Items = open
			}
			table, names := RequestsTable(list.Items, f)
			return output(pf, streams, view{table: table, names: names, kind: "AccessRequestList", body: list})
		},
	}
	cmd.Flags().BoolVar(&pending, "pending", false, "Only the requests waiting for approval.")
	cmd.Flags().BoolVar(&active, "active", false, "Only the active ones.")
	cmd.Flags().BoolVar(&all, "all", false, "Every request, decided or not.")
	cmd.MarkFlagsMutuallyExclusive("pending", "active", "all")
	addPrintFlags(pf, cmd)
	return cmd
}
