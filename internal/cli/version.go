package cli

import (
	"cmp"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Version is the plugin's version, set at build time with
// -ldflags "-X github.com/operator-framework/oria/internal/cli.Version=v0.1.0";
// without it, the module version Go recorded (usually "(devel)").
var Version = ""

// VersionInfo is the body of `kubectl oria version -o json|yaml`.
type VersionInfo struct {
	Version string `json:"version"`
	// Commit, CommitTime and Modified are the source's Git revision, as Go
	// records it when building in a clone.
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	GoVersion  string `json:"goVersion"`
	// ReportAPIVersion is the apiVersion of the -o json|yaml reports.
	ReportAPIVersion string `json:"reportAPIVersion"`
	// Server is the version of oria's server (its Deployment), unless
	// --client.
	Server *ServerInfo `json:"server,omitempty"`
}

// BuildVersion returns the plugin's version information.
func BuildVersion() VersionInfo {
	v := VersionInfo{Version: Version, ReportAPIVersion: ReportAPIVersion}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.GoVersion = bi.GoVersion
	if v.Version == "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCommand(cs *clients, streams genericiooptions.IOStreams) *cobra.Command {
	pf := printFlags()
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version [--client]",
		Short: "The plugin's version, Git commit and Go version, and the version of oria's server",
		Long: `Prints the plugin's version, Git commit and Go version, and the version oria's Deployment runs (in
-n, default ` + DefaultNamespace + `): the ` + "app.kubernetes.io/version" + ` label of its pods, which the installer
stamps, else the tag of its image. --client prints the plugin's alone. A server that cannot be
read is a warning: kubectl oria check compares the two.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := BuildVersion()
			if !clientOnly {
				if s, err := readServerVersion(cmd, cs); err != nil {
					warn(streams.ErrOut, []string{fmt.Sprintf("the server's version: %v", err)})
				} else {
					v.Server = &s
				}
			}
			if *pf.OutputFormat != "" {
				p, err := pf.ToPrinter()
				if err != nil {
					return err
				}
				obj, err := Report("Version", v)
				if err != nil {
					return err
				}
				return p.PrintObj(obj, streams.Out)
			}
			fmt.Fprintf(streams.Out, "kubectl-oria %s\n", v.Version)
			if v.Commit != "" {
				modified := ""
				if v.Modified {
					modified = " (modified)"
				}
				fmt.Fprintf(streams.Out, "commit %s%s, %s\n", v.Commit, modified, v.CommitTime)
			}
			fmt.Fprintf(streams.Out, "built with %s\n", v.GoVersion)
			if s := v.Server; s != nil {
				fmt.Fprintf(streams.Out, "server: oria %s (%s)\n", cmp.Or(s.Version, "unknown"), s.From)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "The plugin's version only: do not read the server's.")
	pf.AddFlags(cmd)
	return cmd
}

func readServerVersion(cmd *cobra.Command, cs *clients) (ServerInfo, error) {
	c, err := cs.get()
	if err != nil {
		return ServerInfo{}, err
	}
	return ServerVersion(cmd.Context(), c, cs.oriaNamespace())
}
