package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"

	policymodel "github.com/operator-framework/oria/internal/policy"
)

// EndedKept is how long after its end status still lists a grant that has
// expired (without --all): the records of older ones stay on their
// objects, out of the daily view.
const EndedKept = 24 * time.Hour

func statusCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var all, watch bool
	cmd := &cobra.Command{
		Use:   "status [EXTENSION...] [--all] [--watch]",
		Short: "Per ClusterExtension: its RBAC mode, APIs, generated or bundle roles, and the RBACPolicies granting them",
		Long: `Per ClusterExtension (those named, or all of them, and those RBACPolicies name that are not
installed): its RBAC mode, its APIs, the roles oria generated or the bundle provides, and the
grants (RBACPolicies, the ScopeInstances they compile into, and ScopeInstances of their own that
bind the extension's roles), with their window and their record: who granted, when and why, and
who revoked, when and why (RECORD; -o json: granted, revoked), as kubectl oria grant and revoke
write it and oria's guard keeps it true. A grant that expired more than 24h ago is left out, and
counted on standard error; --all lists it. -o name lists the extensions that exist.
--watch (-w) prints the table, then, as kubectl get --watch does, a line for each change of
an RBACPolicy (its row: created, Bound, Expired, revoked, deleted) until Ctrl-C.`,
		Example: `  kubectl oria status
  kubectl oria status argocd -o yaml
  kubectl oria status argocd --all -o wide   # every grant, expired ones too, with its subjects
  kubectl oria status argocd -w              # then a line for each change of one of its RBACPolicies`,
		ValidArgsFunction: completeExtensions(cs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cs.get()
			if err != nil {
				return err
			}
			var follow *followed
			if watch {
				if follow, err = startWatch(cmd.Context(), cs, *pf.OutputFormat); err != nil {
					return err
				}
			}
			s, err := Read(cmd.Context(), c, What{Extensions: args})
			if err != nil {
				return err
			}
			warn(streams.ErrOut, s.Warnings)
			report, err := Status(s, args...)
			if err != nil {
				return err
			}
			if !all {
				if n := HideEnded(report, s.Now, EndedKept); n > 0 {
					fmt.Fprintf(streams.ErrOut, "%s that expired more than %s ago not listed; --all lists them\n", plural(n, "grant"), endedKeptText)
				}
			}
			var names []string
			for _, e := range report {
				if !e.NotFound {
					names = append(names, "clusterextension.olm.operatorframework.io/"+e.Name)
				}
			}
			if err := output(pf, streams, view{table: StatusTable(report), names: names, kind: "StatusReport", body: StatusReport{Extensions: report}}); err != nil || follow == nil {
				return err
			}
			w := &StatusWatch{Out: streams.Out, Wide: *pf.OutputFormat == "wide", Extensions: args, Modes: map[string]string{}}
			for _, e := range report {
				w.Modes[e.Name] = e.modeText()
			}
			w.Seen(follow.policies)
			return w.Run(cmd.Context(), follow.client, follow.rv)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "Also list the grants that expired more than 24h ago.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "After the table, print a line for each change of an RBACPolicy (its row), until Ctrl-C.")
	addPrintFlags(pf, cmd)
	return cmd
}

// endedKeptText is EndedKept as messages say it.
const endedKeptText = "24h"

// HideEnded removes from report the grants whose window ended more than
// kept before now (an RBACPolicy with the ScopeInstance compiled from it),
// and returns how many grants it removed (policies and ScopeInstances of
// their own; a compiled instance goes with its policy).
func HideEnded(report []ExtensionStatus, now time.Time, kept time.Duration) int {
	n := 0
	for i := range report {
		gone := map[string]bool{} // compiled instances of hidden policies
		var out []Grant
		for _, g := range report[i].Grants {
			old := g.Window != nil && g.Window.State == WindowExpired && g.Window.ExpiresAt != nil && now.Sub(g.Window.ExpiresAt.Time) > kept
			switch {
			case g.Kind == "ScopeInstance" && gone[g.Name]:
				continue
			case old && g.Kind == "RBACPolicy":
				gone[policymodel.ObjectName(g.Name)] = true
				n++
				continue
			case old:
				n++
				continue
			}
			out = append(out, g)
		}
		report[i].Grants = out
	}
	return n
}

// RecordText is a grant's record for a table cell: `granted by "alice"
// 2025-06-06T12:00:00Z: INC-1; revoked by "bob" ...`, "" when none is
// kept.
func RecordText(g Grant) string {
	var parts []string
	if r := g.Request; r != nil {
		by := "self-activated"
		if r.ApprovedBy != "" {
			by = fmt.Sprintf("approved by %q", r.ApprovedBy)
		}
		if r.StartsAt != "" {
			by += " from " + r.StartsAt
		}
		if r.EndsAt != "" {
			by += " until " + r.EndsAt
		}
		parts = append(parts, fmt.Sprintf("AccessRequest %s: requested by %q (%s), %s", r.Name, r.Requester, r.Reason, by))
	}
	if g.Granted != nil {
		parts = append(parts, "granted "+g.Granted.String())
	}
	if g.Revoked != nil {
		parts = append(parts, "revoked "+g.Revoked.String())
	}
	return strings.Join(parts, "; ")
}

// followed is what status --watch starts from: the policies as listed
// before the table was read, and the list's version, so that no change
// after it is missed.
type followed struct {
	client   client.WithWatch
	policies []oriav1alpha1.RBACPolicy
	rv       string
}

// startWatch lists the RBACPolicies for status --watch, which prints a
// table (-o wide or none).
func startWatch(ctx context.Context, cs *clients, format string) (*followed, error) {
	if format != "" && format != "wide" {
		return nil, fmt.Errorf("--watch prints the table and then a line per change: -o %s cannot be combined with it", format)
	}
	cfg, opts, err := restConfig(cs.flags)
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	list := &oriav1alpha1.RBACPolicyList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing RBACPolicies: %w", err)
	}
	return &followed{client: c, policies: list.Items, rv: list.ResourceVersion}, nil
}
