package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/manager"
	"github.com/operator-framework/oria/test/localcluster"
)

// OriaUser is the user integration suites run controllers as.
const OriaUser = "oria-under-test"

// OriaConfig returns a rest.Config for a user holding exactly oria's
// ClusterRole (config/rbac/role.yaml, generated from the controllers'
// RBAC markers) and nothing else, with oria's default client rate limit. Suites
// that run their controllers with it prove that the shipped RBAC suffices,
// escalate and bind included.
func OriaConfig(ctx context.Context, c *localcluster.Cluster, admin client.Client) (*rest.Config, error) {
	b, err := os.ReadFile(filepath.Join(localcluster.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		return nil, fmt.Errorf("decoding config/rbac/role.yaml: %w", err)
	}
	role.Name = OriaUser
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: OriaUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: OriaUser},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: OriaUser}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	cfg, err := c.AddUser(OriaUser)
	if err != nil {
		return nil, err
	}
	manager.SetClientRateLimit(cfg, manager.DefaultKubeAPIQPS, manager.DefaultKubeAPIBurst) // oria's defaults (cmd/oria)
	return cfg, nil
}

// StartManager starts a manager with oria's scheme and cache configuration
// (metrics and probes off), registers controllers with setup, and waits for
// its caches. The returned stop function stops it and waits.
func StartManager(cfg *rest.Config, setup func(ctrl.Manager) error) (ctrl.Manager, func(), error) {
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, nil, err
	}
	cacheOpts, err := manager.CacheOptions(cfg)
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests may start several managers with the same controllers.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, nil, err
	}
	if err := lookup.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, nil, err
	}
	if err := setup(mgr); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return nil, nil, errors.Join(errors.New("manager cache did not sync"), <-done)
	}
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	}
	return mgr, stop, nil
}

// AdminClient returns an uncached cluster-admin client with oria's scheme:
// tests assert on the API server's state, not on a cache.
func AdminClient(c *localcluster.Cluster) (client.Client, error) {
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(c.Config, client.Options{Scheme: scheme})
}

// RunWithManager is RunMain for integration suites that share one manager:
// once the control plane is up it sets *admin to an uncached cluster-admin
// client, then runs a manager as OriaUser (oria's own RBAC, not
// cluster-admin) with the controllers setup registers, and sets *mgr to it.
func RunWithManager(m *testing.M, admin *client.Client, mgr *ctrl.Manager, setup func(ctrl.Manager) error) {
	var cluster *localcluster.Cluster
	RunMain(m, &cluster, localcluster.Options{}, func() (func(int), error) {
		var err error
		if *admin, err = AdminClient(cluster); err != nil {
			return nil, err
		}
		cfg, err := OriaConfig(context.Background(), cluster, *admin)
		if err != nil {
			return nil, err
		}
		var stop func()
		if *mgr, stop, err = StartManager(cfg, setup); err != nil {
			return nil, err
		}
		return func(int) { stop() }, nil
	})
}
