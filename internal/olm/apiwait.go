package olm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ClusterExtensionCRD is the name of OLM v1's ClusterExtension CRD.
var ClusterExtensionCRD = "clusterextensions." + ocv1.GroupVersion.Group

// DefaultCheckInterval is how often oria asks the API server's discovery
// whether it serves the ClusterExtension API, while it waits for it: one
// small GET (of /apis/olm.operatorframework.io/v1), and only until the API
// appears.
const DefaultCheckInterval = 5 * time.Second

// olmProbeTimeout bounds one discovery request of the wait.
const olmProbeTimeout = 10 * time.Second

// The wait's log messages: MissingMessage is logged once when oria
// starts on a cluster without OLM v1 (UnknownMessage instead when
// discovery failed), ServedMessage once when the API appears.
const (
	MissingMessage = "OLM v1 is not installed: the API server does not serve the ClusterExtension API; " +
		"oria starts what needs it once the CRD is installed and established, without a restart"
	UnknownMessage = "could not ask the API server whether it serves OLM v1's ClusterExtension API; " +
		"oria starts what needs it once it does, without a restart"
	ServedMessage = "OLM v1's ClusterExtension API is served: starting what waited for it"
)

// APIWaitOptions configure an APIWait.
type APIWaitOptions struct {
	// Waiting says, in the log, what waits for the ClusterExtension API.
	Waiting string
	// Serving says, in the log, what oria serves meanwhile.
	Serving string
	// Observe is told whether the API is served: once at setup, and once
	// more when it appears (metrics.SetOLMAPIAvailable). Required.
	Observe func(available bool)
	// Interval is DefaultCheckInterval when zero.
	Interval time.Duration
}

// APIWait holds back what needs OLM v1's ClusterExtension API (the
// ClusterExtension controller, the RBACPolicy controller's watch of
// extensions) on a cluster that does not serve it, and starts it when it
// appears, in the running manager, without a restart; everything else
// (ScopeTemplates, ScopeInstances, the orphan sweep, the escalation guard)
// runs meanwhile. Without it a controller's watch of ClusterExtensions
// never starts, so its controller never starts either, and
// controller-runtime logs an error every 10 s.
//
// NewAPIWait asks discovery once: when the API is served the wait is over
// from the start and nothing changes. Otherwise it logs MissingMessage
// (or UnknownMessage), once, and runs in the manager (on every replica, elected or not) asking
// discovery every Interval until the API server lists ClusterExtensions in
// olm.operatorframework.io/v1 (which it does once the CRD is Established)
// and the manager's RESTMapper knows them; it then registers what waited,
// with the manager (controllers added to a started manager start at once,
// or when the replica is elected), starts the deferred watches, logs
// ServedMessage, and stops asking. The wait ends once: a CRD removed
// later is not watched for (the controllers then log their watch errors
// until it is back).
type APIWait struct {
	served   func(context.Context) (bool, error)
	interval time.Duration
	observe  func(bool)
	log      logr.Logger

	mu      sync.Mutex
	pending []func() error
	opened  chan struct{}
}

// NewAPIWait returns mgr's wait, over when mgr's API server serves the
// ClusterExtension API now, and added to mgr to wait for it otherwise.
func NewAPIWait(mgr ctrl.Manager, opts APIWaitOptions) (*APIWait, error) {
	served, err := discoveryProbe(mgr.GetConfig(), mgr.GetRESTMapper())
	if err != nil {
		return nil, err
	}
	return newAPIWait(served, mgr.Add, ctrl.Log.WithName("olm"), opts)
}

// newAPIWait is NewAPIWait with its parts: served asks whether the API is
// served, add adds the wait to the manager.
func newAPIWait(served func(context.Context) (bool, error), add func(ctrlmanager.Runnable) error, log logr.Logger, opts APIWaitOptions) (*APIWait, error) {
	if opts.Observe == nil {
		return nil, errors.New("the wait for OLM v1's API needs an observer of the ClusterExtension API's availability")
	}
	g := &APIWait{
		served:   served,
		interval: opts.Interval,
		observe:  opts.Observe,
		log:      log,
		opened:   make(chan struct{}),
	}
	if g.interval <= 0 {
		g.interval = DefaultCheckInterval
	}
	ctx, cancel := context.WithTimeout(context.Background(), olmProbeTimeout)
	defer cancel()
	ok, err := served(ctx)
	if ok {
		close(g.opened)
		g.observe(true)
		return g, nil
	}
	g.observe(false)
	msg, kv := MissingMessage, []any{"crd", ClusterExtensionCRD, "waiting", opts.Waiting, "serving", opts.Serving, "checkEvery", g.interval.String()}
	if err != nil {
		msg, kv = UnknownMessage, append(kv, "error", err.Error())
	}
	g.log.Info(msg, kv...)
	if err := add(g); err != nil {
		return nil, fmt.Errorf("adding the wait for the ClusterExtension API: %w", err)
	}
	return g, nil
}

// Available reports whether the wait is over: the API is served and what
// waited for it is registered.
func (g *APIWait) Available() bool {
	select {
	case <-g.opened:
		return true
	default:
		return false
	}
}

// Then runs setup (which registers controllers with the manager) now when
// the wait is over, or when it opens; an error of a setup run then stops
// the manager, as it would have stopped oria at start.
func (g *APIWait) Then(setup func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.Available() {
		return setup()
	}
	g.pending = append(g.pending, setup)
	return nil
}

// Defer returns src, started when the wait ends: a controller's watch of
// ClusterExtensions, which a controller that starts earlier needs.
func (g *APIWait) Defer(src source.Source) source.Source {
	return &deferredSource{wait: g, inner: src}
}

// Start implements manager.Runnable: it waits for the API and opens the
// wait; it returns at once when ctx ends first.
func (g *APIWait) Start(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, g.interval, false, func(ctx context.Context) (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, olmProbeTimeout)
		defer cancel()
		ok, err := g.served(pctx)
		if err != nil {
			g.log.V(1).Info("asking discovery for the ClusterExtension API", "error", err.Error())
		}
		return ok, nil
	})
	if err != nil {
		return nil // stopped before the API appeared
	}
	g.log.Info(ServedMessage, "crd", ClusterExtensionCRD)
	return g.open()
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica waits, logs and reports; the controllers it registers are
// started by the manager when the replica leads.
func (g *APIWait) NeedLeaderElection() bool { return false }

// open runs the pending setups, in the order Then received them, and then
// starts the deferred watches.
func (g *APIWait) open() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, setup := range g.pending {
		if err := setup(); err != nil {
			return fmt.Errorf("starting what waited for the ClusterExtension API: %w", err)
		}
	}
	g.pending = nil
	close(g.opened)
	g.observe(true)
	return nil
}

// deferredSource starts its inner source when its wait ends (at once when
// it is open).
type deferredSource struct {
	wait  *APIWait
	inner source.Source

	mu      sync.Mutex
	syncing bool // inner was started by Start: WaitForSync waits for it
}

// Start implements source.Source.
func (d *deferredSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	if d.wait.Available() {
		d.mu.Lock()
		d.syncing = true
		d.mu.Unlock()
		return d.inner.Start(ctx, q)
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-d.wait.opened:
			if err := d.inner.Start(ctx, q); err != nil {
				d.wait.log.Error(err, "starting a watch that waited for the ClusterExtension API", "source", fmt.Sprint(d.inner))
			}
		}
	}()
	return nil
}

// WaitForSync implements source.SyncingSource: a source started later is
// not waited for (the controller started without it).
func (d *deferredSource) WaitForSync(ctx context.Context) error {
	d.mu.Lock()
	syncing := d.syncing
	d.mu.Unlock()
	if s, ok := d.inner.(source.SyncingSource); ok && syncing {
		return s.WaitForSync(ctx)
	}
	return nil
}

func (d *deferredSource) String() string {
	return fmt.Sprintf("%v (once the ClusterExtension API is served)", d.inner)
}

// discoveryProbe returns the question the wait asks: does the API server
// list ClusterExtensions in olm.operatorframework.io/v1, and does mapper
// (the manager's, which its cache and controllers use) map them?
func discoveryProbe(cfg *rest.Config, mapper meta.RESTMapper) (func(context.Context) (bool, error), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = olmProbeTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("making a discovery client: %w", err)
	}
	gvk := ocv1.GroupVersion.WithKind(ocv1.ClusterExtensionKind)
	return func(context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(ocv1.GroupVersion.String())
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("discovery of %s: %w", ocv1.GroupVersion, err)
		case !servesKind(list, gvk.Kind):
			return false, nil
		}
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("mapping %s: %w", gvk, err)
		}
		return true, nil
	}, nil
}

// servesKind reports whether list (a group version's discovery) has kind
// as a top-level resource (not a subresource such as status).
func servesKind(list *metav1.APIResourceList, kind string) bool {
	if list == nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
		return r.Kind == kind && !strings.Contains(r.Name, "/")
	})
}
