package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// version is oria's version, stamped at build time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/oria
//
// (the Dockerfile and `make docker-build` do). Without it, the module version
// Go recorded (usually "(devel)").
var version = ""

// Version returns oria's version and, when Go recorded it, the Git revision.
func Version() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if v == "" {
			v = "(unknown)"
		}
		return v
	}
	if v == "" {
		v = bi.Main.Version
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	out := v
	if rev != "" {
		out += ", commit " + rev + modified
	}
	return out + ", " + bi.GoVersion
}

func printVersion(w io.Writer) {
	fmt.Fprintf(w, "oria %s\n", Version())
}

// The environment a Pod gives oria through the downward API
// (config/manager/manager.yaml).
const (
	// envPodNamespace is the namespace oria runs in: its leader election
	// Lease lives there.
	envPodNamespace = "POD_NAMESPACE"
	// envMemoryLimit is the container's memory limit in bytes
	// (resourceFieldRef limits.memory); oria sets its Go memory limit to
	// memoryLimitPercent of it unless GOMEMLIMIT is set.
	envMemoryLimit = "ORIA_MEMORY_LIMIT"
)

// memoryLimitPercent is the share of the container's memory limit oria gives
// the Go runtime as a soft limit: the rest is for what the runtime does not
// count (its own overhead, thread stacks) and for the time the collector
// needs to catch up with a burst of allocations.
const memoryLimitPercent = 90

// softMemoryLimit returns the Go memory limit (bytes) that env asks for:
// memoryLimitPercent of ORIA_MEMORY_LIMIT, or 0 (leave the runtime alone)
// when GOMEMLIMIT is set, when ORIA_MEMORY_LIMIT is not, or when it is not a
// positive number of bytes (an error then).
func softMemoryLimit(getenv func(string) string) (int64, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, nil // the runtime read it already
	}
	raw := strings.TrimSpace(getenv(envMemoryLimit))
	if raw == "" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("invalid %s %q: must be the container's memory limit in bytes", envMemoryLimit, raw)
	}
	if limit > math.MaxInt64/memoryLimitPercent {
		return 0, nil // no real limit (the node's allocatable memory at most)
	}
	return limit * memoryLimitPercent / 100, nil
}

// tuneMemory applies softMemoryLimit and returns it (0: unchanged).
func tuneMemory() (int64, error) {
	limit, err := softMemoryLimit(os.Getenv)
	if err != nil || limit == 0 {
		return 0, err
	}
	debug.SetMemoryLimit(limit)
	return limit, nil
}

// podNamespace returns the namespace oria runs in: $POD_NAMESPACE (the
// downward API), else the ServiceAccount's namespace file, else kube-system
// (outside a cluster).
func podNamespace() string {
	if ns := strings.TrimSpace(os.Getenv(envPodNamespace)); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "kube-system"
}
