// Command kubectl-oria is the kubectl plugin of oria: copy it to a directory
// on PATH and run `kubectl oria status` or `kubectl oria access EXTENSION`
// (see docs/user-guide.md).
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/operator-framework/oria/internal/cli"
)

func main() {
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
