package cli

import (
	"strings"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
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
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := cs.get()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list corev1.NamespaceList
		if err := c.List(cmd.Context(), &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, toComplete) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
