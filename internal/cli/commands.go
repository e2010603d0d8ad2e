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

func planCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var files Files
	cmd := &cobra.Command{
		Use:   "plan -f FILE|DIR [-f ...] [-R]",
		Short: "What applying RBACPolicies, ScopeTemplates or ScopeInstances would grant, and whether oria's guard admits them for you",
		Long: `Reads the RBACPolicies, ScopeTemplates and ScopeInstances of the files (new or changed; -f
repeats; a directory's .json, .yaml and .yml files, its subdirectories' too with -R; "-" reads
standard input; documents separated by ---, or Lists) and prints, writing nothing:
- the objects of other kinds it skipped, and why;
- for each object, whether applying it creates or updates it, and the API server's verdict on a
  server-side dry run of that write, as you: the escalation guard runs on dry runs, so a refusal
  shows its message;
- the ScopeTemplates the instances bind: their subjects and roles, with the rules of each role;
- the ClusterRoles, RoleBindings and ClusterRoleBindings that would be created, updated and
  deleted, per namespace, computed with oria's own functions (policy compilation, binding
  layer) from the cluster as it is, and compared with what exists.
An update keeps the object's metadata and replaces its spec, as kubectl apply of a full spec
does. -o name lists the objects that would change. Exit code: 0 when every object is admitted,
2 when one is REFUSED (the plan is printed first), 1 when plan could not run.`,
		Example: `  kubectl oria plan -f rbacpolicy.yaml
  kubectl oria plan -f manifests/ -R -o wide
  kubectl oria plan -f - -o json < template.yaml
  kubectl oria plan -f policies/ || echo "refused: see above"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, skipped, err := ReadFiles(files, streams.In)
			if err != nil {
				return err
			}
			report := &PlanReport{Changes: []Change{}}
			if len(objs) > 0 {
				c, err := cs.get()
				if err != nil {
					return err
				}
				if report, err = PlanFile(cmd.Context(), c, objs); err != nil {
					return err
				}
			}
			report.Skipped = skipped
			var names []string
			for _, ch := range report.Changes {
				names = appendNew(names, resourceName(ch.Kind)+"/"+ch.Name)
			}
			if *pf.OutputFormat == "name" {
				fmt.Fprint(streams.ErrOut, skippedText(skipped))
			}
			if err := output(pf, streams, view{header: PlanHeader(report), table: PlanTable(report.Changes), names: names, kind: "PlanReport", body: report}); err != nil {
				return err
			}
			if n := refused(report.Objects); n > 0 {
				return answerNo("%d of %d objects REFUSED", n, len(report.Objects))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files.Names, "filename", "f", nil, "A file or directory of RBACPolicies, ScopeTemplates or ScopeInstances (- for standard input); repeat for several.")
	cmd.Flags().BoolVarP(&files.Recursive, "recursive", "R", false, "Read the directories of -f recursively.")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
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

// PlanHeader is what the table of a plan follows: the skipped objects,
// each object's verdict, what each template binds, the notes and the count
// of unchanged objects.
func PlanHeader(r *PlanReport) string {
	var b strings.Builder
	b.WriteString(skippedText(r.Skipped))
	if len(r.Skipped) > 0 {
		if len(r.Objects) == 0 {
			b.WriteString("Nothing to plan: no RBACPolicy, ScopeTemplate or ScopeInstance.\n")
			return b.String()
		}
		b.WriteString("\n")
	}
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
