package cli

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestCompletionScripts: `completion SHELL` registers the kubectl-oria
// command (cobra alone would register "oria", which nobody types), says
// how kubectl oria completes, and leaves the command's name as it was.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_kubectl-oria kubectl-oria",
		"zsh":  "compdef _kubectl-oria kubectl-oria",
		"fish": "complete -c kubectl-oria ",
	} {
		t.Run(shell, func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
			cmd.SetArgs([]string{"completion", shell})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			script := out.String()
			if !strings.Contains(script, want) {
				t.Errorf("the %s script does not contain %q", shell, want)
			}
			if strings.Contains(script, " oria\n") || strings.Contains(script, "compdef _oria oria") {
				t.Errorf("the %s script registers the command oria", shell)
			}
			if !strings.Contains(script, CompletionExecutable) {
				t.Errorf("the %s script does not say how kubectl oria completes (%s)", shell, CompletionExecutable)
			}
			if cmd.Use != "oria" {
				t.Errorf("the root command is now %q", cmd.Use)
			}
		})
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	// Loaded in bash, the script registers a completion for kubectl-oria.
	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"completion", "bash"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(bash, "-c", out.String()+"\ncomplete -p kubectl-oria").CombinedOutput()
	if err != nil || !strings.Contains(string(got), "__start_kubectl-oria kubectl-oria") {
		t.Errorf("bash: complete -p kubectl-oria: %v\n%s", err, got)
	}
}

func TestBindingName(t *testing.T) {
	for in, want := range map[string]string{
		"RoleBinding team-a/devs":                                        "rolebinding.rbac.authorization.k8s.io/devs",
		"ClusterRoleBinding cluster-admin":                               "clusterrolebinding.rbac.authorization.k8s.io/cluster-admin",
		"ClusterRoleBinding system:controller:generic-garbage-collector": "clusterrolebinding.rbac.authorization.k8s.io/system:controller:generic-garbage-collector",
	} {
		if got := bindingName(in); got != want {
			t.Errorf("bindingName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGrantCompletion: grant completes its access levels and --for
// durations, revoke its --dry-run modes, without a cluster.
func TestGrantCompletion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"grant", "alice", "--access", ""}, []string{"view", "edit", "admin"}},
		{[]string{"grant", "alice", "--for", ""}, []string{"30m", "1h", "2h"}},
		{[]string{"revoke", "x", "--dry-run=s"}, []string{"client", "server"}},
		{[]string{"gr"}, []string{"grant"}},
		{[]string{"re"}, []string{"revoke"}},
	} {
		var out bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
		cmd.SetArgs(append([]string{"__complete"}, tc.args...))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w+"\n") && !strings.Contains(out.String(), w+"\t") {
				t.Errorf("completing %q: %q not offered:\n%s", tc.args, w, out.String())
			}
		}
	}
}
