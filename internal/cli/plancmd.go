package cli

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/operator-framework/oria/internal/impersonate"
)

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
does. What an object the API server refuses would write is listed as REFUSED, and not counted,
as is a binding that an instance's ServiceAccount ceiling may not write (a dry run as it).
What you may not read (namespaces, ClusterRoles, bindings) is named in a note, with what it
leaves unknown. -o name prints one line per object that exists and would change (updated or
deleted, and the file's objects that exist), "-n NAMESPACE resource/name" for a namespaced one,
for "xargs -L1 kubectl get"; objects to create do not exist yet, and are only counted (on
standard error). Exit code: 0 when every object is admitted, 2 when one is REFUSED (the plan is
printed first), 1 when plan could not run.`,
		Example: `  kubectl oria plan -f rbacpolicy.yaml
  kubectl oria plan -f manifests/ -R -o wide
  kubectl oria plan -f - -o json < template.yaml
  kubectl oria plan -f policy.yaml -o name | xargs -L1 kubectl get
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
				imp, err := ceilingClients(cs)
				if err != nil {
					return err
				}
				if report, err = PlanFile(cmd.Context(), c, objs, imp); err != nil {
					return err
				}
			}
			report.Skipped = skipped
			names, creates := PlanNames(report)
			if *pf.OutputFormat == "name" {
				fmt.Fprint(streams.ErrOut, skippedText(skipped))
				if creates > 0 {
					fmt.Fprintf(streams.ErrOut, "%d to create, not listed: they do not exist yet\n", creates)
				}
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
	fmt.Fprintf(&b, "\n%d to create, %d to update, %d to delete, %d unchanged", counted(r.Changes, ActionCreate), counted(r.Changes, ActionUpdate),
		counted(r.Changes, ActionDelete), r.Unchanged)
	if n := refusedChanges(r.Changes); n > 0 {
		fmt.Fprintf(&b, "; %d REFUSED (not written)", n)
	}
	if len(r.Unread) > 0 {
		fmt.Fprintf(&b, " (as %s, who may not list %s: see the notes)", cmp.Or(r.As, "you"), strings.Join(r.Unread, ", "))
	}
	b.WriteString("\n")
	if len(r.Changes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// ceilingClients hands out clients acting as a ServiceAccount, from
// kubectl's flags (their --as replaced), for the dry runs of the bindings a
// ceiling writes.
func ceilingClients(cs *clients) (Impersonator, error) {
	cfg, opts, err := restConfig(cs.flags)
	if err != nil {
		return nil, err
	}
	return impersonate.New(cfg, opts)
}

// PlanNames are the lines of plan -o name: one per object that exists and
// the plan changes (updates or deletes, not refused), and per object of
// the files that exists, each "-n NAMESPACE resource/name" for a
// namespaced object and "resource/name" otherwise, so that `xargs -L1
// kubectl get` fetches each in its namespace. creates counts the objects
// to create, which do not exist yet and are not listed.
func PlanNames(r *PlanReport) (names []string, creates int) {
	for _, o := range r.Objects {
		if o.Operation == ActionUpdate && o.Admitted {
			names = appendNew(names, resourceName(o.Kind)+"/"+o.Name)
		}
	}
	for _, c := range r.Changes {
		switch {
		case c.Refused:
		case c.Action == ActionCreate:
			creates++
		case c.Namespace != "":
			names = appendNew(names, "-n "+c.Namespace+" "+resourceName(c.Kind)+"/"+c.Name)
		default:
			names = appendNew(names, resourceName(c.Kind)+"/"+c.Name)
		}
	}
	return names, creates
}
