package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
)

// CompletionExecutable is the name kubectl looks for on PATH to complete
// `kubectl oria ...` (kubectl 1.26 and later): a link to kubectl-oria
// under this name answers as `kubectl-oria __complete ...`.
const CompletionExecutable = "kubectl_complete-oria"

// CompletionArgs returns the arguments the plugin runs with when invoked
// as CompletionExecutable (base is the executable's base name): cobra's
// hidden __complete command followed by what kubectl passed.
func CompletionArgs(base string, args []string) ([]string, bool) {
	base = strings.TrimSuffix(base, ".exe")
	if base != CompletionExecutable {
		return nil, false
	}
	return append([]string{cobra.ShellCompRequestCmd}, args...), true
}

// Executable is the plugin's executable name, which the completion scripts
// register (cobra would register the root command's name, "oria").
const Executable = "kubectl-oria"

// completionShells write the completion script of each shell.
var completionShells = map[string]func(root *cobra.Command, w io.Writer) error{
	"bash":       func(root *cobra.Command, w io.Writer) error { return root.GenBashCompletionV2(w, true) },
	"zsh":        func(root *cobra.Command, w io.Writer) error { return root.GenZshCompletion(w) },
	"fish":       func(root *cobra.Command, w io.Writer) error { return root.GenFishCompletion(w, true) },
	"powershell": func(root *cobra.Command, w io.Writer) error { return root.GenPowerShellCompletionWithDesc(w) },
}

// completionNote ends every script: how `kubectl oria` completes.
const completionNote = `
# kubectl completes "kubectl oria ..." (kubectl 1.26 and later) by running
# kubectl_complete-oria from PATH: link it next to kubectl-oria once,
#   ln -s "$(command -v kubectl-oria)" "$(dirname "$(command -v kubectl-oria)")/kubectl_complete-oria"
# (krew does not make the link), and load kubectl's own completion script.
`

func completionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "The shell completion script of kubectl-oria; kubectl oria completes through kubectl_complete-oria",
		Long: `Prints the completion script of the shell for the kubectl-oria command, e.g.
  source <(kubectl-oria completion bash)            # in ~/.bashrc
  kubectl-oria completion zsh > "${fpath[1]}/_kubectl-oria"
  kubectl-oria completion fish > ~/.config/fish/completions/kubectl-oria.fish
kubectl itself (1.26 and later) completes "kubectl oria ..." by running an executable named
` + CompletionExecutable + ` from PATH, with kubectl's own completion script loaded; the plugin is that
executable too when called by that name, so link it once next to kubectl-oria:
  ln -s kubectl-oria /usr/local/bin/` + CompletionExecutable + `
Both complete subcommands, flags, extension names, namespaces, and the RBACPolicies revoke ends.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		RunE: func(cmd *cobra.Command, args []string) error {
			gen, ok := completionShells[args[0]]
			if !ok {
				return fmt.Errorf("unknown shell %q: bash, zsh, fish or powershell", args[0])
			}
			root := cmd.Root()
			use := root.Use
			root.Use = Executable
			defer func() { root.Use = use }()
			if err := gen(root, streams.Out); err != nil {
				return err
			}
			if args[0] != "powershell" {
				_, err := io.WriteString(streams.Out, completionNote)
				return err
			}
			return nil
		},
	}
}

// completeExtensions completes ClusterExtension names (those the user may
// list), leaving out those already given.
func completeExtensions(cs *clients) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := cs.get()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list ocv1.ClusterExtensionList
		if err := c.List(cmd.Context(), &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, e := range list.Items {
			if strings.HasPrefix(e.Name, toComplete) && !contains(args, e.Name) {
				out = append(out, e.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamespaces completes -n with the namespaces the user may list.
func completeNamespaces(root *cobra.Command, cs *clients) {
	_ = root.RegisterFlagCompletionFunc("namespace", namespaceCompletion(cs))
}

// namespaceCompletion completes a namespace the user may list (grant's -n
// takes several: those given are left out).
func namespaceCompletion(cs *clients) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := cs.get()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list corev1.NamespaceList
		if err := c.List(cmd.Context(), &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var given []string
		if f := cmd.Flags().Lookup("namespace"); f != nil {
			if s, ok := f.Value.(interface{ GetSlice() []string }); ok {
				given = s.GetSlice()
			}
		}
		var out []cobra.Completion
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, toComplete) && !contains(given, ns.Name) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completePolicies completes the names of the RBACPolicies the user may
// list (revoke's NAME), those whose window has not ended first.
func completePolicies(cs *clients) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := cs.get()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list oriav1alpha1.RBACPolicyList
		if err := c.List(cmd.Context(), &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		now := time.Now()
		var live, ended []cobra.Completion
		for _, p := range list.Items {
			if !strings.HasPrefix(p.Name, toComplete) {
				continue
			}
			w := windowOf(binding.PolicyWindow(p.Spec), now)
			switch {
			case w == nil:
				live = append(live, p.Name)
			case w.State == WindowExpired:
				ended = append(ended, cobra.CompletionWithDesc(p.Name, w.Description))
			default:
				live = append(live, cobra.CompletionWithDesc(p.Name, w.Description))
			}
		}
		return append(live, ended...), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
