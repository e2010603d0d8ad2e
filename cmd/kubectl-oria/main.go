// Command kubectl-oria is the kubectl plugin of oria: copy it to a directory
// on PATH and run `kubectl oria status`, `kubectl oria access EXTENSION`,
// `kubectl oria can USER`, `kubectl oria plan -f FILE`, `kubectl oria grant
// USER --extension E --access LEVEL -n NS --for 2h`, `kubectl oria revoke
// NAME` or `kubectl oria check` (see docs/user-guide.md). Linked or copied
// as kubectl_complete-oria, it answers kubectl's shell completion of
// `kubectl oria`.
//
// Exit codes: 0 when the command ran and the answer is yes, 1 when it could
// not run, 2 when the answer is no (plan: an object is refused; grant: the
// guard refused the policy; check: a check failed).
package main

import (
	"os"
	"path/filepath"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/operator-framework/oria/internal/cli"
)

func main() {
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if args, ok := cli.CompletionArgs(filepath.Base(os.Args[0]), os.Args[1:]); ok {
		cmd.SetArgs(args)
	}
	os.Exit(cli.ExitCode(cmd.Execute()))
}
