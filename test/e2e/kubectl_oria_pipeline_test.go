package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/cli"
	"github.com/operator-framework/oria/internal/testutil"
)

// TestKubectlOriaPipeline: the plugin as a tool in a pipeline. plan reads a
// directory (its subdirectories with -R), plans oria's kinds and says which
// objects of other kinds it skipped; -o name of every command prints what
// `kubectl get` prints for the same objects (and takes back, with -n where
// namespaced); the bash completion script completes kubectl-oria, and
// kubectl completes `kubectl oria` through kubectl_complete-oria. (plan's
// exit code on a refusal: TestKubectlOriaPlan.)
func TestKubectlOriaPipeline(t *testing.T) {
	testutil.NeedCluster(t)
	ns := testutil.CreateNamespace(t, k8sClient, "oria-pipe", nil)
	ext, group := installExtension(t, "pipe", oriav1alpha1.RBACModeFineGrained)
	devs := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: testutil.UniqueName("devs")}
	newPolicy := func(access oriav1alpha1.Access) *oriav1alpha1.RBACPolicy {
		return &oriav1alpha1.RBACPolicy{TypeMeta: metav1.TypeMeta{APIVersion: oriav1alpha1.GroupVersion.String(), Kind: "RBACPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName(string(access))},
			Spec:       oriav1alpha1.RBACPolicySpec{ExtensionName: ext, Access: access, Subjects: []rbacv1.Subject{devs}, Namespaces: []string{ns}}}
	}
	view, edit := newPolicy(oriav1alpha1.AccessView), newPolicy(oriav1alpha1.AccessEdit)
	other := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "a.yaml"), view, other)
	writeYAML(t, filepath.Join(dir, "sub", "b.yml"), edit)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("not read: not .json, .yaml or .yml\n"), 0o600))
	waitExtensionCondition(t, ext, metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)

	// A directory: its files, not its subdirectories'; the ConfigMap is
	// skipped, and said so.
	report := planOf(t, "-f", dir)
	assert.Equal(t, []cli.PlannedObject{{Kind: "RBACPolicy", Name: view.Name, Operation: cli.ActionCreate, Admitted: true}}, report.Objects)
	assert.Equal(t, []cli.SkippedObject{{Kind: "ConfigMap", APIVersion: "v1", Name: ns + "/settings", Source: filepath.Join(dir, "a.yaml"),
		Reason: "not one of oria's kinds: plan takes RBACPolicies, ScopeTemplates and ScopeInstances"}}, report.Skipped)
	text := kubectlOria(t, "plan", "-f", dir)
	t.Logf("kubectl oria plan -f DIR:\n%s", text)
	assert.Contains(t, text, "Skipped ConfigMap "+ns+"/settings ("+filepath.Join(dir, "a.yaml")+"): not one of oria's kinds")
	assert.Contains(t, text, "RBACPolicy "+view.Name+" (create): admitted")
	// -R: the subdirectories too.
	report = planOf(t, "-f", dir, "-R")
	require.Len(t, report.Objects, 2)
	assert.Equal(t, edit.Name, report.Objects[1].Name)
	assert.True(t, report.Objects[1].Admitted)
	// -o name lists only objects that exist: none yet (the pipeline of
	// plan -o name: TestKubectlOriaPlanNames).
	planned, stderr, err := runPlugin(t, "", "plan", "-f", dir, "-R", "-o", "name")
	require.NoError(t, err, stderr)
	assert.Empty(t, planned)
	assert.Contains(t, stderr, "to create, not listed: they do not exist yet")

	// Applied: -o name of each command names what kubectl get shows.
	testutil.Create(t, k8sClient, view.DeepCopy())
	waitPolicyReady(t, view.Name)
	eventuallyAccess(t, true, testutil.Access{Groups: []string{devs.Name}, Verb: "list", Group: group, Resource: "widgets", Namespace: ns})
	for _, args := range [][]string{
		{"status", ext},
		{"access", ext, "-n", ns},
		{"can", "--group", devs.Name, "--extension", ext},
		{"check", "-n", ns},
	} {
		out, _, err := execPlugin(pluginBin, append(args, "-o", "name")...)
		require.Contains(t, []int{cli.ExitOK, cli.ExitNo}, exitCode(err), "%v", err)
		names := strings.Fields(out)
		t.Logf("kubectl oria %s -o name: %v", strings.Join(args, " "), names)
		// check names what is wrong or missing: nothing, for the suite's
		// oria running outside the cluster (its webhook has a URL).
		exists := args[0] != "check"
		if exists {
			assert.NotEmpty(t, names, "kubectl oria %s -o name", strings.Join(args, " "))
		}
		for _, name := range names {
			assertKubectlGet(t, name, ns, exists)
		}
	}

	// Completion: the bash script completes kubectl-oria...
	kubectlOria(t, "version", "--client")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	complete := func(words ...string) []string {
		t.Helper()
		// The bash-completion package (which cobra's scripts, kubectl's
		// too, rely on) is not installed here: a stub of its word
		// splitting stands in.
		script := `_get_comp_words_by_ref() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      -n) shift 2 ;;
      cur) cur=${COMP_WORDS[COMP_CWORD]}; shift ;;
      prev) prev=${COMP_WORDS[COMP_CWORD-1]}; shift ;;
      words) words=("${COMP_WORDS[@]}"); shift ;;
      cword) cword=$COMP_CWORD; shift ;;
      *) shift ;;
    esac
  done
}
source <(kubectl-oria completion bash)
COMP_WORDS=(` + strings.Join(words, " ") + ` "")
COMP_CWORD=$((${#COMP_WORDS[@]}-1))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
__start_kubectl-oria
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "-c", script)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "PATH="+filepath.Dir(pluginBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.Fields(string(out))
	}
	assert.Contains(t, complete("kubectl-oria"), "check")
	assert.Contains(t, complete("kubectl-oria", "status"), ext)
	// ...and kubectl completes `kubectl oria` through kubectl_complete-oria.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl")
	}
	completer := filepath.Join(filepath.Dir(pluginBin), cli.CompletionExecutable)
	if _, err := os.Lstat(completer); err != nil {
		require.NoError(t, os.Symlink(pluginBin, completer))
	}
	cmd := exec.Command(kubectl, "__complete", "oria", "status", "")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "PATH="+filepath.Dir(pluginBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Contains(t, strings.Fields(string(out)), ext, "kubectl __complete oria status:\n%s", out)
}

// writeYAML writes objs as one YAML file (documents separated by ---).
func writeYAML(t *testing.T, path string, objs ...any) {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		require.NoError(t, err)
		docs = append(docs, string(b))
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600))
}

// assertKubectlGet runs `kubectl get NAME -n NS -o name`: it must print
// NAME back; unless exists, kubectl may also know the kind and find no
// object of that name.
func assertKubectlGet(t *testing.T, name, ns string, exists bool) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "get", name, "-n", ns, "-o", "name")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if exists {
		assert.NoError(t, err, "kubectl get %s -n %s: %s", name, ns, stderr.String())
		assert.Equal(t, name, strings.TrimSpace(stdout.String()), "kubectl get %s -n %s -o name", name, ns)
		return
	}
	if err == nil {
		assert.Equal(t, name, strings.TrimSpace(stdout.String()), "kubectl get %s -n %s -o name", name, ns)
		return
	}
	assert.Contains(t, stderr.String(), "NotFound", "kubectl get %s -n %s", name, ns)
}
