package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func canCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var opts CanOptions
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "can [USER] [--group GROUP...] [--serviceaccount NAMESPACE/NAME] [-n NAMESPACE]",
		Short: "What a user, group or ServiceAccount may do with the APIs of every ClusterExtension, each row confirmed by SubjectAccessReviews",
		Long: `The reverse of access: lists every extension, API, namespace and level that the identity
holds, and through what. The identity is USER with the groups given (and system:authenticated, as
kubectl's --as adds it), or the groups alone, or a ServiceAccount (its user name and groups).
Candidates are the bindings naming the user, one of the groups or the ServiceAccount; each
namespace and API they reach is asked of the API server with SubjectAccessReviews for the whole
identity, and only what it allows is shown. Through a time-bound grant, the via says until when
(in -o json, the row's expiresAt when every via ends). What it cannot see: groups the user gets
at login that you do not name. -o name lists the extensions.`,
		Example: `  kubectl oria can alice
  kubectl oria can alice --group developers -n team-a
  kubectl oria can --group developers --extension argocd -o wide
  kubectl oria can --serviceaccount ci/deployer -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.User = args[0]
			}
			c, err := cs.get()
			if err != nil {
				return err
			}
			opts.Namespace = cs.namespace(allNamespaces)
			warnNamespace(cmd.Context(), c, opts.Namespace, streams.ErrOut)
			report, warnings, err := Can(cmd.Context(), c, SARAuthorizer{Client: c}, opts)
			if err != nil {
				return err
			}
			warn(streams.ErrOut, warnings)
			var names []string
			for _, r := range report.Access {
				names = appendNew(names, "clusterextension.olm.operatorframework.io/"+r.Extension)
			}
			return output(pf, streams, view{table: CanTable(report.Access), names: names, kind: "CanReport", body: report})
		},
	}
	cmd.Flags().StringArrayVar(&opts.Groups, "group", nil, "A group of the identity (repeat for several).")
	cmd.Flags().StringVar(&opts.ServiceAccount, "serviceaccount", "", "A ServiceAccount, NAMESPACE/NAME, instead of a user.")
	cmd.Flags().StringArrayVar(&opts.Extensions, "extension", nil, "Only this ClusterExtension (repeat for several).")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Every namespace (the default unless -n is given).")
	_ = cmd.RegisterFlagCompletionFunc("extension", completeExtensions(cs))
	addPrintFlags(pf, cmd)
	return cmd
}

func refused(objs []PlannedObject) int {
	n := 0
	for _, o := range objs {
		if !o.Admitted {
			n++
		}
	}
	return n
}

// skippedText lists the skipped objects, one a line.
func skippedText(skipped []SkippedObject) string {
	var b strings.Builder
	for _, s := range skipped {
		fmt.Fprintf(&b, "Skipped %s %s (%s): %s\n", s.Kind, s.Name, s.Source, s.Reason)
	}
	return b.String()
}

// resourceName is the resource.group of a kind, as -o name writes it.
func resourceName(kind string) string {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "RoleBinding":
		return strings.ToLower(kind) + ".rbac.authorization.k8s.io"
	}
	return strings.ToLower(kind) + ".oria.operatorframework.io"
}
