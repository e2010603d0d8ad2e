package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/lookup"
	"github.com/operator-framework/oria/internal/manager"
)

// watched is one resource the change counter watches, with a label
// selector ("" for every object); a change of an object excused names is
// counted apart, as not oria's doing.
type watched struct {
	name     string
	gvr      schema.GroupVersionResource
	selector string
	excused  func(namespace, name string) bool
}

// leaderElectionEvents is the name under which the counter keeps the
// Events the leader election records on its Lease ("... became leader"):
// as the Lease's renewals, the mechanism of a handover, not oria's writes.
const leaderElectionEvents = "leader election Events"

// leaderElectionEvent reports whether the Event named name in namespace
// is about oria's Lease in the benchmark's leader-election namespace (an
// Event is named after the object it is about, then a suffix).
func leaderElectionEvent(namespace, name string) bool {
	return namespace == leaderElectionNamespace && strings.HasPrefix(name, manager.LeaderElectionID+".")
}

// leaderElectionNamespace holds the Lease of the takeover rows' replicas.
const leaderElectionNamespace = "kube-system"

// changeTargets are what oria may write: the RBAC objects it created, its
// own kinds (spec and status), ClusterExtensions (oria's condition), the
// ConfigMaps it publishes into, and Events (the benchmark's control plane
// runs no other controller that records any). The Lease of the leader
// election is not among them: renewing it is the only write a leader
// makes by design.
func changeTargets() []watched {
	managed := labels.SelectorFromSet(labels.Set{oriav1alpha1.LabelManaged: oriav1alpha1.ManagedValue}).String()
	oria := oriav1alpha1.GroupVersion
	return []watched{
		{"RoleBinding", roleBindingsGVR, managed, nil},
		{"ClusterRoleBinding", clusterRoleBindingsGVR, managed, nil},
		{"ClusterRole", clusterRolesGVR, managed, nil},
		{"ScopeTemplate", oria.WithResource("scopetemplates"), "", nil},
		{"ScopeInstance", oria.WithResource("scopeinstances"), "", nil},
		{"RBACPolicy", oria.WithResource("rbacpolicies"), "", nil},
		{"ClusterExtension", clusterExtensionsGVR, "", nil},
		{"ConfigMap", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, lookup.PublishedSelector().String(), nil},
		{"Event", schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, "", leaderElectionEvent},
	}
}

var clusterRoleBindingsGVR = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")

// changeCounter counts every change (create, update, delete) of the
// watched resources from the moment it started: each watch starts at the
// resource version of a list made then, so nothing before is replayed.
type changeCounter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	counts   map[string]int
	examples []string // the first few changes, for the log
	errs     []string
}

// maxExamples is how many changes the counter describes.
const maxExamples = 10

// countChanges starts counting changes of targets.
func countChanges(ctx context.Context, md metadata.Interface, targets []watched) (*changeCounter, error) {
	ctx, cancel := context.WithCancel(ctx)
	c := &changeCounter{cancel: cancel, counts: map[string]int{}}
	for _, t := range targets {
		list, err := md.Resource(t.gvr).List(ctx, metav1.ListOptions{LabelSelector: t.selector, Limit: 1})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("listing %s: %w", t.name, err)
		}
		c.wg.Add(1)
		go c.follow(ctx, md, t, list.ResourceVersion)
	}
	return c, nil
}

// follow watches t from resource version rv, watching again from the last
// version seen when the API server ends the watch.
func (c *changeCounter) follow(ctx context.Context, md metadata.Interface, t watched, rv string) {
	defer c.wg.Done()
	for ctx.Err() == nil {
		w, err := md.Resource(t.gvr).Watch(ctx, metav1.ListOptions{LabelSelector: t.selector, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil {
				c.fail(t, err)
			}
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if ctx.Err() == nil { // else: the count's end
					c.fail(t, apierrors.FromObject(ev.Object))
				}
				w.Stop()
				return
			}
			m, ok := ev.Object.(metav1.Object)
			if !ok {
				continue
			}
			rv = m.GetResourceVersion()
			switch {
			case ev.Type == watch.Bookmark:
			case t.excused != nil && t.excused(m.GetNamespace(), m.GetName()):
				c.record(leaderElectionEvents, ev.Type, m)
			default:
				c.record(t.name, ev.Type, m)
			}
		}
	}
}

func (c *changeCounter) record(kind string, typ watch.EventType, m metav1.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[kind]++
	if len(c.examples) < maxExamples {
		name := m.GetName()
		if ns := m.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		c.examples = append(c.examples, fmt.Sprintf("%s %s %s", typ, kind, name))
	}
}

func (c *changeCounter) fail(t watched, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf("watching %s: %v", t.name, err))
}

// stop ends the count and returns the changes by resource (only those
// that changed; the excused ones under leaderElectionEvents), the first
// few changes and the watches' failures (a failed watch may have missed
// changes).
func (c *changeCounter) stop() (map[string]int, []string, []string) {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts), slices.Clone(c.examples), slices.Clone(c.errs)
}

// total adds up changes by resource, but for the excused ones.
func total(counts map[string]int) int {
	n := 0
	for k, v := range counts {
		if k != leaderElectionEvents {
			n += v
		}
	}
	return n
}

// fmtCounts shows changes by resource: "ScopeInstance 2, Event 1", or "0".
func fmtCounts(counts map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}
