package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
identity, and only what it allows is shown. What it cannot see: groups the user gets at login
that you do not name. -o name lists the extensions.`,
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

func planCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var file string
	cmd := &cobra.Command{
		Use:   "plan -f FILE",
		Short: "What applying RBACPolicies, ScopeTemplates or ScopeInstances would grant, and whether oria's guard admits them for you",
		Long: `Reads the RBACPolicies, ScopeTemplates and ScopeInstances of FILE (new or changed; "-" reads
standard input) and prints, writing nothing:
- for each object, whether applying it creates or updates it, and the API server's verdict on a
  server-side dry run of that write, as you: the escalation guard runs on dry runs, so a refusal
  shows its message;
- the ScopeTemplates the instances bind: their subjects and roles, with the rules of each role;
- the ClusterRoles, RoleBindings and ClusterRoleBindings that would be created, updated and
  deleted, per namespace, computed with oria's own functions (policy compilation, binding
  layer) from the cluster as it is, and compared with what exists.
An update keeps the object's metadata and replaces its spec, as kubectl apply of a full spec
does. -o name lists the objects that would change.`,
		Example: `  kubectl oria plan -f rbacpolicy.yaml
  kubectl oria plan -f instance.yaml -o wide
  kubectl oria plan -f - -o json < template.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := readFile(file, streams.In)
			if err != nil {
				return err
			}
			c, err := cs.get()
			if err != nil {
				return err
			}
			report, err := PlanFile(cmd.Context(), c, objs)
			if err != nil {
				return err
			}
			var names []string
			for _, ch := range report.Changes {
				names = append(names, resourceName(ch.Kind)+"/"+ch.Name)
			}
			return output(pf, streams, view{header: PlanHeader(report), table: PlanTable(report.Changes), names: names, kind: "PlanReport", body: report})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "The file of RBACPolicies, ScopeTemplates or ScopeInstances (- for standard input).")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	addPrintFlags(pf, cmd)
	return cmd
}

// readFile decodes the objects of the named file, or of stdin for "-".
func readFile(name string, stdin io.Reader) ([]client.Object, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	objs, err := Decode(r, scheme)
	if err == nil && len(objs) == 0 {
		err = fmt.Errorf("%s holds no object", name)
	}
	return objs, err
}

// resourceName is the resource.group of a kind, as -o name writes it.
func resourceName(kind string) string {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "RoleBinding":
		return strings.ToLower(kind) + ".rbac.authorization.k8s.io"
	}
	return strings.ToLower(kind) + ".oria.operatorframework.io"
}

// PlanHeader is what the table of a plan follows: each object's verdict,
// what each template binds, the notes and the count of unchanged objects.
func PlanHeader(r *PlanReport) string {
	var b strings.Builder
	for _, o := range r.Objects {
		verdict := "admitted"
		if !o.Admitted {
			verdict = "REFUSED: " + o.Message
		}
		fmt.Fprintf(&b, "%s %s (%s): %s\n", o.Kind, o.Name, o.Operation, verdict)
	}
	for _, t := range r.Templates {
		fmt.Fprintf(&b, "\nScopeTemplate %s, bound by %s:\n  subjects: %s\n", t.Name, strings.Join(t.Instances, ", "), strings.Join(t.Subjects, ", "))
		for _, role := range t.Roles {
			fmt.Fprintf(&b, "  role %s (%s)\n", role.Name, role.Source)
			for _, rule := range role.Rules {
				fmt.Fprintf(&b, "    %s\n", rule)
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%d to create, %d to update, %d to delete, %d unchanged\n", count(r.Changes, ActionCreate), count(r.Changes, ActionUpdate),
		count(r.Changes, ActionDelete), r.Unchanged)
	if len(r.Changes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

func count(changes []Change, action string) int {
	n := 0
	for _, c := range changes {
		if c.Action == action {
			n++
		}
	}
	return n
}
