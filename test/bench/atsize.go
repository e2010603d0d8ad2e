package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// AtSizes are the sizes and settings of the rows at size (issue 34): the
// floor from the user's apply, oria's memory limit as installed, the
// restart and takeover rows, and the sizing rows.
type AtSizes struct {
	// ApplyFloor times, in the fan-out rows, a second floor:
	// ApplyFloorWorkers plain workers, no client-side limit, no warm-up,
	// from the user's apply (a server-side dry-run create of the row's
	// ScopeInstances through the escalation guard) to the last RoleBinding
	// seen.
	ApplyFloor        bool `json:"applyFloor"`
	ApplyFloorWorkers int  `json:"applyFloorWorkers"`
	// MemoryLimit is the -memory-limit flag: "shipped" (config/manager's
	// Deployment), "none", or a quantity. MemoryLimitBytes is what it
	// resolved to (0: none), GoMemLimitBytes the Go memory limit oria sets
	// from it (90 %, as installed; 0 when GOMEMLIMIT was given instead).
	MemoryLimit      string `json:"memoryLimit"`
	MemoryLimitBytes int64  `json:"memoryLimitBytes,omitempty"`
	GoMemLimitBytes  int64  `json:"goMemLimitBytes,omitempty"`
	// The restart scenario: RestartInstances ScopeInstances over
	// RestartNamespaces namespaces, RestartExtensions ClusterExtensions in
	// Legacy mode with one CRD each, RestartPolicies RBACPolicies;
	// RestartRuns runs of each row.
	RestartInstances  int `json:"restartInstances,omitempty"`
	RestartNamespaces int `json:"restartNamespaces,omitempty"`
	RestartExtensions int `json:"restartExtensions,omitempty"`
	RestartPolicies   int `json:"restartPolicies,omitempty"`
	RestartRuns       int `json:"restartRuns,omitempty"`
	// The sizing scenario: each step adds this many (and again as many).
	SizingExtensions int `json:"sizingExtensions,omitempty"`
	SizingCRDs       int `json:"sizingCRDs,omitempty"`
	SizingBindings   int `json:"sizingBindings,omitempty"`
	SizingRBAC       int `json:"sizingRBAC,omitempty"`
}

// atSizeQuick are the -quick sizes of these flags.
var atSizeQuick = map[string]string{
	"restart-instances": "2", "restart-namespaces": "500", "restart-extensions": "50", "restart-policies": "100",
	"sizing-extensions": "50", "sizing-crds": "100", "sizing-bindings": "1000", "sizing-rbac": "1000",
}

// register adds the flags to fs.
func (a *AtSizes) register(fs *flag.FlagSet) {
	fs.BoolVar(&a.ApplyFloor, "apply-floor", true, "Fan-out rows: also time the floor from the user's apply: -apply-floor-workers plain workers, no client-side limit, no warm-up, "+
		"from a server-side dry-run create of the row's ScopeInstances through the escalation guard to the last RoleBinding seen.")
	fs.IntVar(&a.ApplyFloorWorkers, "apply-floor-workers", 16, "Workers of the floor from the user's apply.")
	fs.StringVar(&a.MemoryLimit, "memory-limit", "shipped", "oria's container memory limit, passed as ORIA_MEMORY_LIMIT (oria sets GOMEMLIMIT to 90 % of it, as installed): "+
		"shipped (config/manager's Deployment), none, or a quantity such as 1Gi.")
	fs.IntVar(&a.RestartInstances, "restart-instances", 20, "Scenario restart: ScopeInstances over -restart-namespaces namespaces (their product: the bindings in place).")
	fs.IntVar(&a.RestartNamespaces, "restart-namespaces", 5000, "Scenario restart: namespaces every ScopeInstance selects.")
	fs.IntVar(&a.RestartExtensions, "restart-extensions", 1000, "Scenario restart: ClusterExtensions in Legacy mode, one CRD each.")
	fs.IntVar(&a.RestartPolicies, "restart-policies", 2000, "Scenario restart: RBACPolicies (view on one extension's API in one namespace each).")
	fs.IntVar(&a.RestartRuns, "restart-runs", 3, "Scenario restart: runs of each row (restart, takeover-kill, takeover-stop).")
	fs.IntVar(&a.SizingExtensions, "sizing-extensions", 2000, "Scenario sizing: ClusterExtensions (no CRD) added per step.")
	fs.IntVar(&a.SizingCRDs, "sizing-crds", 1000, "Scenario sizing: CRDs (4 generated ClusterRoles each) added per step.")
	fs.IntVar(&a.SizingBindings, "sizing-bindings", 20000, "Scenario sizing: oria's RoleBindings added per step.")
	fs.IntVar(&a.SizingRBAC, "sizing-rbac", 20000, "Scenario sizing: RBAC objects oria did not create (RoleBindings and Roles, half each) added per step.")
}

// check validates the flags and resolves the memory limit (root is the
// source tree, where config/manager is).
func (a *AtSizes) check(root string) error {
	for name, v := range map[string]int{
		"apply-floor-workers": a.ApplyFloorWorkers, "restart-instances": a.RestartInstances, "restart-namespaces": a.RestartNamespaces,
		"restart-runs": a.RestartRuns, "sizing-extensions": a.SizingExtensions, "sizing-crds": a.SizingCRDs,
		"sizing-bindings": a.SizingBindings, "sizing-rbac": a.SizingRBAC,
	} {
		if v < 1 {
			return fmt.Errorf("invalid -%s %d: must be at least 1", name, v)
		}
	}
	if a.RestartExtensions < 0 || a.RestartPolicies < 0 {
		return errors.New("-restart-extensions and -restart-policies must be >= 0")
	}
	if a.RestartPolicies > 0 && a.RestartExtensions == 0 {
		return errors.New("-restart-policies needs -restart-extensions > 0: a policy grants an extension's API")
	}
	limit, err := resolveMemoryLimit(a.MemoryLimit, filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		return err
	}
	a.MemoryLimitBytes = limit
	return nil
}

// goMemLimitPercent is the share of ORIA_MEMORY_LIMIT oria gives the Go
// runtime (cmd/oria's memoryLimitPercent).
const goMemLimitPercent = 90

// memoryLimitEnv is how the Deployment passes oria its container's memory
// limit (cmd/oria's envMemoryLimit).
const memoryLimitEnv = "ORIA_MEMORY_LIMIT"

// resolveMemoryLimit returns the bytes of -memory-limit: the Deployment's
// manager container limit in the file at manifest for "shipped", 0 for
// "none", else the quantity.
func resolveMemoryLimit(value, manifest string) (int64, error) {
	switch value {
	case "none":
		return 0, nil
	case "shipped":
		data, err := os.ReadFile(manifest)
		if err != nil {
			return 0, fmt.Errorf("-memory-limit=shipped: %w", err)
		}
		return deploymentMemoryLimit(data)
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Value() <= 0 {
		return 0, fmt.Errorf("invalid -memory-limit %q: shipped, none or a positive quantity (e.g. 1Gi)", value)
	}
	return q.Value(), nil
}

// deploymentMemoryLimit returns the memory limit of the "manager"
// container of the first Deployment in a multi-document manifest.
func deploymentMemoryLimit(manifest []byte) (int64, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return 0, errors.New("no Deployment with a manager container in the manifest")
		} else if err != nil {
			return 0, fmt.Errorf("reading the manifest: %w", err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "manager" {
				continue
			}
			q, ok := c.Resources.Limits["memory"]
			if !ok {
				return 0, fmt.Errorf("Deployment %s: the manager container has no memory limit", d.Name)
			}
			return q.Value(), nil
		}
	}
}

// applyMemoryLimit passes limit (bytes; 0: none) to the oria processes the
// benchmark starts, as the Deployment does, and returns the Go memory limit
// oria sets from it (0 when GOMEMLIMIT is set: oria then leaves it alone).
func applyMemoryLimit(limit int64) (int64, error) {
	if limit <= 0 {
		return 0, os.Unsetenv(memoryLimitEnv)
	}
	if err := os.Setenv(memoryLimitEnv, strconv.FormatInt(limit, 10)); err != nil {
		return 0, err
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	return limit * goMemLimitPercent / 100, nil
}
