package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/internal/manager"
)

// NewCommand returns the `kubectl oria` command with its status and access
// subcommands. Kubeconfig, context, namespace and impersonation flags are
// kubectl's (cli-runtime ConfigFlags); -o takes kubectl's json, yaml,
// jsonpath and go-template formats, the default is a table.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:          "oria",
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl oria"},
		Short:        "Inspect oria: the RBAC of OLM v1 ClusterExtensions, and who may use their APIs",
		SilenceUsage: true,
	}
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(statusCommand(flags, streams), accessCommand(flags, streams))
	return root
}

func printFlags() *genericclioptions.PrintFlags {
	return &genericclioptions.PrintFlags{
		OutputFormat:         new(string),
		JSONYamlPrintFlags:   genericclioptions.NewJSONYamlPrintFlags(),
		TemplatePrinterFlags: genericclioptions.NewKubeTemplatePrintFlags(),
	}
}

func statusCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	cmd := &cobra.Command{
		Use:   "status [EXTENSION...]",
		Short: "Per ClusterExtension: its RBAC mode, APIs, generated or bundle roles, and the RBACPolicies granting them",
		Example: `  kubectl oria status
  kubectl oria status argocd -o yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(flags)
			if err != nil {
				return err
			}
			s, err := Read(cmd.Context(), c, What{})
			if err != nil {
				return err
			}
			report, err := Status(s, args...)
			if err != nil {
				return err
			}
			return output(pf, streams, StatusTable(report), "StatusReport", StatusReport{Extensions: report})
		},
	}
	pf.AddFlags(cmd)
	return cmd
}

func accessCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "access EXTENSION [-n NAMESPACE]",
		Short: "Who may use a ClusterExtension's APIs, where, at which level and through what, each row confirmed by a SubjectAccessReview",
		Long: `Lists the users, groups and ServiceAccounts that may use the APIs of EXTENSION.
Candidates are the subjects of every RoleBinding and ClusterRoleBinding whose role has a rule
on one of the APIs (oria's bindings for RBACPolicies and ScopeInstances, bindings to the
built-in view/edit/admin roles the Legacy roles aggregate into, bindings made by hand); each is
then asked of the API server with SubjectAccessReviews, and only what it allows is shown.
Levels: view = get, list, watch; edit = view + create, update, patch, delete;
admin = edit + deletecollection; partial = some verbs, not all of view.
Without -n the report covers every namespace ("*": through a ClusterRoleBinding, or a
cluster-scoped API).`,
		Example: `  kubectl oria access argocd
  kubectl oria access argocd -n team-a -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(flags)
			if err != nil {
				return err
			}
			ns := ""
			if flags.Namespace != nil && *flags.Namespace != "" && !allNamespaces {
				ns = *flags.Namespace
			}
			report, err := Access(cmd.Context(), c, SARAuthorizer{Client: c}, args[0], ns)
			if err != nil {
				return err
			}
			return output(pf, streams, AccessTable(report.Access), "AccessReport", report)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Every namespace (the default unless -n is given).")
	pf.AddFlags(cmd)
	return cmd
}

// Access builds the access report of extension, limited to namespace when
// it is set.
func Access(ctx context.Context, c client.Reader, az Authorizer, extension, namespace string) (*AccessReport, error) {
	s, err := Read(ctx, c, What{Bindings: true, Namespace: namespace})
	if err != nil {
		return nil, err
	}
	if _, err := Status(s, extension); err != nil {
		return nil, err
	}
	apis := ExtensionAPIs(s.CRDs, extension)
	rows, err := Confirm(ctx, az, Candidates(s, apis, namespace), apis, namespace)
	if err != nil {
		return nil, err
	}
	return &AccessReport{Extension: extension, Namespace: namespace, APIs: apis, Access: rows}, nil
}

// Client limits of the plugin, kubectl's defaults.
const (
	clientQPS   = 50
	clientBurst = 300
)

func newClient(flags *genericclioptions.ConfigFlags) (client.Client, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	// kubectl's own client limits: access asks one SubjectAccessReview per
	// subject, namespace, API and verb, which client-go's default of 5 per
	// second would stretch to many seconds.
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	return c, nil
}

// output writes table with kubectl's table printer when no -o is given,
// else the report as an object of kind.
func output(pf *genericclioptions.PrintFlags, streams genericiooptions.IOStreams, table runtime.Object, kind string, body any) error {
	if *pf.OutputFormat == "" || *pf.OutputFormat == "wide" {
		return printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, streams.Out)
	}
	p, err := pf.ToPrinter()
	if err != nil {
		return err
	}
	obj, err := Report(kind, body)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, streams.Out)
}
