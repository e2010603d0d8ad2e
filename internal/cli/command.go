package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewCommand returns the `kubectl oria` command and its subcommands.
// Kubeconfig, context, namespace and impersonation flags are kubectl's
// (cli-runtime ConfigFlags); -o takes kubectl's json, yaml, name, wide,
// jsonpath and go-template formats, the default is a table. -o name prints
// objects as kind.group/name, which `kubectl get` takes back (with -n for
// a namespaced one). A command returns a NoError when its answer is no
// (ExitCode).
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:          "oria",
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl oria"},
		Short:        "Inspect oria: the RBAC of OLM v1 ClusterExtensions, who may use their APIs, what a change would grant; grant and revoke access for a time",
		SilenceUsage: true,
	}
	flags.AddFlags(root.PersistentFlags())
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	c := &clients{flags: flags}
	completeNamespaces(root, c)
	root.AddCommand(statusCommand(c, streams), accessCommand(c, streams), canCommand(c, streams),
		planCommand(c, streams), grantCommand(c, streams), revokeCommand(c, streams), checkCommand(c, streams),
		versionCommand(c, streams), completionCommand(streams))
	root.AddCommand(requestCommands(c, streams)...)
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// clients makes the plugin's client from kubectl's flags, once.
type clients struct {
	flags *genericclioptions.ConfigFlags
	c     client.Client
}

func (cs *clients) get() (client.Client, error) {
	if cs.c == nil {
		c, err := newClient(cs.flags)
		if err != nil {
			return nil, err
		}
		cs.c = c
	}
	return cs.c, nil
}

// namespace is -n, or "" with --all-namespaces or without -n.
func (cs *clients) namespace(all bool) string {
	if all || cs.flags.Namespace == nil {
		return ""
	}
	return *cs.flags.Namespace
}

func printFlags() *genericclioptions.PrintFlags {
	return &genericclioptions.PrintFlags{
		OutputFormat:         new(string),
		JSONYamlPrintFlags:   genericclioptions.NewJSONYamlPrintFlags(),
		TemplatePrinterFlags: genericclioptions.NewKubeTemplatePrintFlags(),
	}
}

// addPrintFlags adds -o, naming the table formats too.
func addPrintFlags(pf *genericclioptions.PrintFlags, cmd *cobra.Command) {
	pf.AddFlags(cmd)
	formats := append([]string{"name", "wide"}, pf.AllowedFormats()...)
	cmd.Flags().Lookup("output").Usage = "Output format. One of: (" + strings.Join(formats, ", ") + ")."
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

func accessCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var allNamespaces, showSystem bool
	cmd := &cobra.Command{
		Use:   "access EXTENSION [-n NAMESPACE]",
		Short: "Who may use a ClusterExtension's APIs, where, at which level and through what, each row confirmed by a SubjectAccessReview",
		Long: `Lists the users, groups and ServiceAccounts that may use the APIs of EXTENSION.
Candidates are the subjects of every RoleBinding and ClusterRoleBinding whose role has a rule
on one of the APIs (oria's bindings for RBACPolicies and ScopeInstances, bindings to the
built-in view/edit/admin roles the Legacy roles aggregate into, bindings made by hand); each is
then asked of the API server with SubjectAccessReviews, and only what it allows is shown.
Levels: view = get, list, watch; edit = view + create, update, patch, delete;
admin = edit + deletecollection; view+update,patch = view and some verbs above it;
partial = some verbs, not all of view.
Kubernetes' own controllers (system: users and kube-system ServiceAccounts bound by the default
policy, such as the garbage collector) are left out unless --show-system is given.
Without -n the report covers every namespace ("*": through a ClusterRoleBinding, or a
cluster-scoped API). A time-bound grant's via says until when, and how long is left (or that its
bindings are still in place out of its window: nothing in force is hidden); grants whose window
has not opened yet grant nothing and are listed after the table as pending. -o name lists the bindings behind the rows, as kubectl get takes them
(rolebinding.rbac.authorization.k8s.io/NAME, in the row's namespace, and
clusterrolebinding.rbac.authorization.k8s.io/NAME).`,
		Example: `  kubectl oria access argocd
  kubectl oria access argocd -n team-a -o wide
  kubectl oria access argocd --show-system -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeExtensions(cs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cs.get()
			if err != nil {
				return err
			}
			ns := cs.namespace(allNamespaces)
			warnNamespace(cmd.Context(), c, ns, streams.ErrOut)
			report, warnings, err := Access(cmd.Context(), c, SARAuthorizer{Client: c}, args[0], ns, showSystem)
			if err != nil {
				return err
			}
			warn(streams.ErrOut, warnings)
			var names []string
			for _, r := range report.Access {
				for _, b := range r.Bindings {
					names = appendNew(names, bindingName(b))
				}
			}
			return output(pf, streams, view{table: AccessTable(report.Access), footer: PendingNote(report.Pending), names: names, kind: "AccessReport", body: report})
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Every namespace (the default unless -n is given).")
	cmd.Flags().BoolVar(&showSystem, "show-system", false, "Also list Kubernetes' own controllers (system: users and kube-system ServiceAccounts of the default RBAC policy).")
	addPrintFlags(pf, cmd)
	return cmd
}

// Access builds the access report of extension, limited to namespace when
// it is set, without Kubernetes' own controllers unless showSystem, and
// returns it with what could not be read.
func Access(ctx context.Context, c client.Reader, az Authorizer, extension, namespace string, showSystem bool) (*AccessReport, []string, error) {
	s, err := Read(ctx, c, What{Bindings: true, Namespace: namespace, Extensions: []string{extension}})
	if err != nil {
		return nil, nil, err
	}
	st, err := Status(s, extension)
	if err != nil {
		return nil, nil, err
	}
	apis := ExtensionAPIs(s.CRDs, extension)
	cands := Candidates(s, apis, namespace)
	if !showSystem {
		cands = WithoutControllers(cands)
	}
	rows, err := Confirm(ctx, az, cands, apis, namespace)
	if err != nil {
		return nil, nil, err
	}
	return &AccessReport{Extension: extension, Namespace: namespace, APIs: apis, Access: rows, Pending: pendingGrants(st[0].Grants)}, s.Warnings, nil
}

// bindingName writes a row's binding ("RoleBinding <namespace>/<name>",
// "ClusterRoleBinding <name>") for -o name, as kubectl get takes it:
// rolebinding.rbac.authorization.k8s.io/<name> (its namespace is the
// row's), clusterrolebinding.rbac.authorization.k8s.io/<name>.
func bindingName(binding string) string {
	kind, name, _ := strings.Cut(binding, " ")
	if _, n, ok := strings.Cut(name, "/"); ok && kind == "RoleBinding" {
		name = n
	}
	return resourceName(kind) + "/" + name
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// warn writes warnings to w the way kubectl does.
func warn(w io.Writer, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintf(w, "Warning: %s\n", msg)
	}
}

// warnNamespace warns when -n names a namespace that does not exist (a
// typo would otherwise read as "nobody has access").
func warnNamespace(ctx context.Context, c client.Reader, ns string, w io.Writer) {
	if ns == "" {
		return
	}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		warn(w, []string{fmt.Sprintf("namespace %q does not exist", ns)})
	}
}

// Client limits of the plugin, kubectl's defaults.
const (
	clientQPS   = 50
	clientBurst = 300
)

// restConfig is kubectl's flags as a REST config, with the plugin's client
// limits: access asks one SubjectAccessReview per subject, namespace, API
// and verb, which client-go's default of 5 per second would stretch to many
// seconds.
func restConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, client.Options, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, client.Options{}, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	scheme, err := Scheme()
	if err != nil {
		return nil, client.Options{}, err
	}
	return cfg, client.Options{Scheme: scheme}, nil
}

func newClient(flags *genericclioptions.ConfigFlags) (client.Client, error) {
	cfg, opts, err := restConfig(flags)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	return c, nil
}

// view is what a command prints: a table (wide columns shown with -o
// wide) between header and footer, names for -o name, or body as a report
// of kind.
type view struct {
	header string
	table  *metav1.Table
	footer string
	names  []string
	kind   string
	body   any
}

// output prints v in the -o format.
func output(pf *genericclioptions.PrintFlags, streams genericiooptions.IOStreams, v view) error {
	switch *pf.OutputFormat {
	case "", "wide":
		fmt.Fprint(streams.Out, v.header)
		if len(v.table.Rows) == 0 {
			if v.header == "" {
				fmt.Fprintln(streams.ErrOut, "Nothing found.")
			}
			fmt.Fprint(streams.Out, v.footer)
			return nil
		}
		if err := printers.NewTablePrinter(printers.PrintOptions{Wide: *pf.OutputFormat == "wide"}).PrintObj(v.table, streams.Out); err != nil {
			return err
		}
		fmt.Fprint(streams.Out, v.footer)
		return nil
	case "name":
		for _, n := range v.names {
			fmt.Fprintln(streams.Out, n)
		}
		return nil
	}
	p, err := pf.ToPrinter()
	if err != nil {
		return err
	}
	obj, err := Report(v.kind, v.body)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, streams.Out)
}
