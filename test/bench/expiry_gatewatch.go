package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/operator-framework/oria/internal/ownership"
)

// gateState is what a watch shows of a gate (binding.GateRole): absent,
// there with its seal alone (the grant grants nothing), or there with
// rules beyond its seal (ownership.GateGrants).
type gateState int

const (
	gateAbsent gateState = iota
	gateEmpty
	gateFilled
)

func (s gateState) String() string {
	return [...]string{"absent", "empty", "filled"}[s]
}

// gateChange is a change of a gate's state, at the arrival of the watch
// event that showed it.
type gateChange struct {
	at    time.Time
	state gateState
}

// gateWatch records every change of one ClusterRole's state (a watch of
// its own, on the watch clients' connection, as the observers).
type gateWatch struct {
	mu      sync.Mutex
	changes []gateChange
	changed chan struct{} // closed and replaced on every change
}

// watchGate starts a gateWatch of the ClusterRole name and waits for its
// informer to sync; it stops with ctx.
func watchGate(ctx context.Context, dyn dynamic.Interface, name string) (*gateWatch, error) {
	g := &gateWatch{changed: make(chan struct{})}
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, clusterRolesGVR, metav1.NamespaceAll, 0, cache.Indexers{},
		func(opts *metav1.ListOptions) { opts.FieldSelector = "metadata.name=" + name })
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    g.update,
		UpdateFunc: func(_, obj any) { g.update(obj) },
		DeleteFunc: func(any) { g.note(gateAbsent) },
	}); err != nil {
		return nil, err
	}
	go inf.Informer().RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("watching ClusterRole %s: not synced within 1m", name)
	}
	return g, nil
}

func (g *gateWatch) update(obj any) {
	g.note(stateOf(obj))
}

// stateOf is the state of the gate obj shows (unstructured, as a dynamic
// informer gives it): filled when it holds a rule beyond its seal, which
// every gate holds, empty or not.
func stateOf(obj any) gateState {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return gateAbsent
	}
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil || !ownership.GateGrants(role) {
		return gateEmpty
	}
	return gateFilled
}

// note records state, unless it is the current one.
func (g *gateWatch) note(state gateState) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.changes); n > 0 && g.changes[n-1].state == state {
		return
	}
	g.changes = append(g.changes, gateChange{at: now, state: state})
	close(g.changed)
	g.changed = make(chan struct{})
}

// state returns the gate's state as the watch shows it now.
func (g *gateWatch) state() gateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.changes); n > 0 {
		return g.changes[n-1].state
	}
	return gateAbsent
}

// wait blocks until the gate's state is one of want, or timeout, and
// returns since when it is (settledAt).
func (g *gateWatch) wait(ctx context.Context, timeout time.Duration, want ...gateState) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		g.mu.Lock()
		at, ok := settledAt(g.changes, want...)
		ch := g.changed
		g.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("the gate is %s, not %v, after %s: %w", g.state(), want, timeout.Round(time.Second), ctx.Err())
		}
	}
}

// settledAt returns since when the last of changes has been in one of the
// states want: the time of the first change after the last one to another
// state (an emptied gate that is then deleted has been closed since it was
// emptied). False when the last state is not one of want.
func settledAt(changes []gateChange, want ...gateState) (time.Time, bool) {
	i := len(changes)
	for i > 0 && slices.Contains(want, changes[i-1].state) {
		i--
	}
	if i == len(changes) {
		return time.Time{}, false
	}
	return changes[i].at, true
}
