package olm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// From v1.5.1 on, operator-controller and catalogd learn their own
// ServiceAccount from the token file every pod has,
// /var/run/secrets/kubernetes.io/serviceaccount/token (a fixed path:
// internal/shared/util/sa), and do not start without it. The suite runs them
// as processes, not pods: podCommand runs each in a mount namespace of its
// own, where a directory of the suite's, holding a real token of a
// ServiceAccount in OLM's namespace as the kubelet would mount it, covers
// /run (/var/run). The host's /run is not touched; the binaries' own files
// (kubeconfig, certificates, caches, logs) are under the work directory.

// podEnv names, in the environment of the test binary run as a shim, the
// directory to mount on /run.
const podEnv = "ORIA_OLM_POD_RUN_DIR"

// enterPodIfShim runs when the test binary starts. As a shim (podEnv set,
// in the mount namespace podCommand made), it mounts the directory on /run
// and executes the OLM binary its arguments name, and never returns.
func enterPodIfShim() {
	dir := os.Getenv(podEnv)
	if dir == "" {
		return
	}
	err := enterPod(dir)
	fmt.Fprintf(os.Stderr, "olm suite, pod shim: %v\n", err)
	os.Exit(1)
}

func enterPod(dir string) error {
	if len(os.Args) < 2 {
		return fmt.Errorf("no binary to run")
	}
	// Private, so that nothing mounted here reaches the host.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	run, err := filepath.EvalSymlinks("/var/run")
	if err != nil {
		return err
	}
	if err := syscall.Mount(dir, run, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", dir, run, err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, podEnv+"=") })
	return syscall.Exec(os.Args[1], os.Args[1:], env)
}

// podCommand returns the command that runs bin with args as in a pod of
// ServiceAccount sa of OLM's namespace, whose token it writes under runDir.
// It needs root or unprivileged user namespaces (then the binary runs as
// root of a user namespace, mapped to the caller).
func podCommand(ctx context.Context, runDir, sa, bin string, args ...string) (*exec.Cmd, error) {
	token, err := serviceAccountToken(ctx, sa)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(runDir, "secrets", "kubernetes.io", "serviceaccount")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, content := range map[string]string{"token": token, "namespace": systemNamespace} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{bin}, args...)...)
	cmd.Env = append(os.Environ(), podEnv+"="+runDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Cloneflags: syscall.CLONE_NEWNS}
	if os.Getuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	return cmd, nil
}

// serviceAccountToken returns a token (valid for a day) of the
// ServiceAccount name of OLM's namespace.
func serviceAccountToken(ctx context.Context, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return "", err
	}
	// The ServiceAccount controller may not have made the account's
	// namespace usable yet; retry briefly.
	deadline := time.Now().Add(time.Minute)
	for {
		tr, err := cs.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
		if err == nil {
			return tr.Status.Token, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("token for %s: %w", name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
