package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/oria/test/localcluster"
)

// Scenario names, as given to -scenarios and shown in the table.
const (
	scenarioExtensions    = "extensions"
	scenarioFanout        = "fanout"
	scenarioNewNamespaces = "new-namespaces" // second half of fanout
	scenarioFanoutPublish = "fanout-publish"
	scenarioScale         = "scale"
	scenarioGuard         = "guard"
	scenarioIdle          = "idle"
	// The guard scenario's rows: the escalation guard on, and the same
	// writes with it off (guardOffSuffix).
	scenarioGuardInstance = "guard-instance"
	scenarioGuardPolicy   = "guard-policy"
)

// scenario is one part of the benchmark; it appends its rows to the report.
type scenario struct {
	name string
	run  func(*bench, context.Context) error
	// inAll: part of -scenarios=all (scale is not: it takes minutes).
	inAll bool
}

// scenarios run in this order: idle last, when everything has converged.
var scenarios = []scenario{
	{scenarioExtensions, (*bench).extensions, true},
	{scenarioFanout, (*bench).fanout, true},
	{scenarioFanoutPublish, (*bench).fanoutPublish, true},
	{scenarioScale, (*bench).scale, false},
	{scenarioGuard, (*bench).guard, false},
	{scenarioExpiry, (*bench).expiry, true},    // rows expiry-wait, expiry, expiry-large
	{scenarioRestart, (*bench).restart, false}, // rows restart, takeover-kill, takeover-stop
	{scenarioSizing, (*bench).sizing, false},
	{scenarioIdle, (*bench).idle, true},
}

// setupWorkers create the scenarios' inputs with the unthrottled admin
// client; setup is not timed.
const setupWorkers = 16

// bench holds what the scenarios share.
type bench struct {
	cfg   *config
	admin client.Client     // cluster-admin, not rate limited: setup only
	watch watchClients      // cluster-admin, for observers
	dyn   dynamic.Interface // cluster-admin, for the trigger and the floor's clean-up
	// restConfig is the cluster-admin configuration admin was made from
	// (the guard scenario impersonates a user with it).
	restConfig *rest.Config
	// floors: without a client-side limit, then at oria's QPS and burst
	// when oria has a limit; none with -no-floor.
	floors []*floor
	// applyFloor is the floor from the user's apply (-apply-floor;
	// applyfloor.go), nil without it.
	applyFloor *floor
	oria       *oriaProcess
	// cluster is the local control plane, oriaFlags oria's command line
	// (the restart scenario starts oria again, and replicas of it).
	cluster   *localcluster.Cluster
	oriaFlags []string
	// leaseRenewals is set while oria runs with leader election: the
	// leader's Lease updates (a PUT every retry period) are not activity
	// (waitQuiet).
	leaseRenewals bool
	mem           *sampler
	cpPIDs        []int // etcd and kube-apiserver
	// apiserver collects the API server's garbage before timed phases
	// and profiles it (-profile).
	apiserver *apiserver
	report    *Report
	logf      func(format string, args ...any)
}

// span is an open measurement window over oria's process.
type span struct {
	start      time.Time
	cpu, cpCPU float64
	requests   requestCounts
	waits      waits
	name       string
	watch      *serverState
}

func (b *bench) begin(ctx context.Context, name string) (*span, error) {
	req, err := b.oria.metrics.requests(ctx)
	if err != nil {
		return nil, err
	}
	cpu, err := procCPU(b.oria.Pid())
	if err != nil {
		return nil, err
	}
	w, err := b.oria.metrics.waits(ctx)
	if err != nil {
		return nil, err
	}
	b.mem.begin()
	b.oria.startCPUProfile(ctx, name)
	b.apiserver.snapshot(ctx, name+"-begin")
	b.apiserver.startCPUProfile(ctx, name)
	watch := b.apiserver.state(ctx)
	b.logf("%s: API server at the start: %s", name, watch)
	return &span{start: time.Now(), cpu: cpu, cpCPU: b.controlPlaneCPU(), requests: req, waits: w, name: name, watch: watch}, nil
}

// end closes the window and fills r's resource figures.
func (b *bench) end(ctx context.Context, s *span, r *Result) error {
	r.WallSeconds = time.Since(s.start).Seconds()
	r.PeakRSS = b.mem.end()
	cpu, err := procCPU(b.oria.Pid())
	if err != nil {
		return err
	}
	r.CPUSeconds = cpu - s.cpu
	r.ControlPlaneCPUSeconds = b.controlPlaneCPU() - s.cpCPU
	b.logf("%s: API server watches: %s", s.name, b.apiserver.watchSince(ctx, s.watch))
	b.apiserver.snapshot(ctx, s.name+"-end")
	req, err := b.oria.metrics.requests(ctx)
	if err != nil {
		return err
	}
	d := req.sub(s.requests)
	r.Writes, r.WritesTotal = d.writes()
	r.Reads, r.Conflicts = int(d["GET"]), int(d[conflictKey])
	if w, err := b.oria.metrics.waits(ctx); err == nil {
		b.logf("%s: %s", s.name, w.since(s.waits))
	}
	b.oria.saveHeapProfile(ctx, s.name)
	return nil
}

// selfCPU is the benchmark process's CPU seconds so far (0 if unknown).
func selfCPU() float64 {
	c, _ := procCPU(os.Getpid())
	return c
}

func (b *bench) controlPlaneCPU() float64 {
	var t float64
	for _, pid := range b.cpPIDs {
		if c, err := procCPU(pid); err == nil {
			t += c
		}
	}
	return t
}

// settle prepares a timed phase: it collects the API server's garbage (see
// apiserver), then waits until the cluster is quiet (waitQuiet).
func (b *bench) settle(ctx context.Context, what string) error {
	if _, err := b.apiserver.collectGarbage(ctx); err != nil {
		b.warn("collecting the API server's garbage %s: %v", what, err)
	}
	return b.waitQuiet(ctx, what)
}

// waitQuiet waits until oria has no queued work and makes no writes, and
// the control plane uses less than a quarter of a core, for two seconds in
// a row: timed phases then start from a settled cluster. It gives up with a
// warning after -timeout.
func (b *bench) waitQuiet(ctx context.Context, what string) error {
	const every, needed = 500 * time.Millisecond, 4
	deadline := time.Now().Add(b.cfg.timeout)
	var prevWrites int
	prevCP, calm := b.controlPlaneCPU(), 0
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.oria.Done():
			return errors.New("oria exited")
		case <-time.After(every):
		}
		busy, err := b.oria.metrics.busy(ctx)
		if err != nil {
			return err
		}
		req, err := b.oria.metrics.requests(ctx)
		if err != nil {
			return err
		}
		_, writes := req.writes()
		if b.leaseRenewals {
			writes -= int(req["PUT"])
		}
		cp := b.controlPlaneCPU()
		if !busy && writes == prevWrites && (cp-prevCP)/every.Seconds() < 0.25 {
			calm++
		} else {
			calm = 0
		}
		if calm >= needed {
			return nil
		}
		prevWrites, prevCP = writes, cp
	}
	b.warn("cluster not quiet %s after %s; measuring anyway", what, b.cfg.timeout)
	return nil
}

func (b *bench) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.logf("warning: %s", msg)
	b.report.Warnings = append(b.report.Warnings, msg)
}

// converge runs one timed phase: start() triggers oria, then the observer
// must see n objects. It fills r.Seconds and r.Converged, and the resource
// figures up to the moment oria is quiet again.
func (b *bench) converge(ctx context.Context, r *Result, obs *observer, n int, start func(context.Context) error) error {
	s, err := b.begin(ctx, r.Name)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := start(ctx); err != nil {
		return err
	}
	b.logf("%s: the trigger's requests took %s", r.Name, time.Since(t0).Round(time.Millisecond))
	first, last, err := obs.waitCount(ctx, n, b.cfg.timeout)
	if err != nil {
		r.Error = err.Error()
	} else {
		r.Converged, r.Seconds, r.FirstSeconds = true, last.Sub(t0).Seconds(), first.Sub(t0).Seconds()
		b.logf("%s: objects per second %s", r.Name, obs.timeline(t0))
	}
	if err := b.waitQuiet(ctx, "after "+r.Name); err != nil {
		return err
	}
	return b.end(ctx, s, r)
}

// measureFloors times every floor client creating a row's objects with
// create, deletes them again with clean, and lets the cluster settle, so
// that oria starts from the same state.
//
// With warmup (-floor-warmup, first round) the floor without a client-side
// limit runs once before it is timed. oria's phase starts right after a
// floor created and deleted the row's objects: the API server's watch cache
// then holds those events (it grew to keep them) and its heap is that much
// larger, which costs it garbage-collection work throughout the phase. The
// warm-up puts the timed floor in the same position; the log shows the API
// server's heap and watch-cache sizes at the start of every phase.
func (b *bench) measureFloors(ctx context.Context, r *Result, warmup bool, create func(context.Context, *floor) (time.Duration, error), clean func(context.Context) error) error {
	for _, f := range b.floors {
		if warmup && !f.limited {
			d, _, err := b.floorPhase(ctx, r, f, "warm-up", create, clean)
			if err != nil {
				return err
			}
			r.FloorWarmupSeconds = d.Seconds()
		}
		d, cpu, err := b.floorPhase(ctx, r, f, "", create, clean)
		if err != nil {
			return err
		}
		if f.limited {
			r.QPSFloorSeconds = d.Seconds()
		} else {
			r.FloorSeconds, r.FloorControlPlaneCPUSeconds, r.FloorCPUSeconds = d.Seconds(), cpu.controlPlane, cpu.client
		}
	}
	return nil
}

// floorCPU is the CPU seconds a floor measurement took: the control
// plane's, and the benchmark process's (the floor's client, with the
// observer that times it).
type floorCPU struct{ controlPlane, client float64 }

// floorPhase runs one floor measurement (a warm-up when what is set), then
// cleans up and settles. It returns the floor's time and CPU.
func (b *bench) floorPhase(ctx context.Context, r *Result, f *floor, what string, create func(context.Context, *floor) (time.Duration, error), clean func(context.Context) error) (time.Duration, floorCPU, error) {
	label, phase := "floor ("+f.name+")", "floor-"+r.Name
	if what != "" {
		label, phase = label+" "+what, phase+"-"+what
	}
	b.logf("%s: creating %d objects", label, r.Objects)
	b.apiserver.snapshot(ctx, phase+"-begin")
	b.apiserver.startCPUProfile(ctx, phase)
	watch := b.apiserver.state(ctx)
	b.logf("%s: API server at the start: %s", label, watch)
	cp, own := b.controlPlaneCPU(), selfCPU()
	d, err := create(ctx, f)
	if err != nil {
		return 0, floorCPU{}, err
	}
	cpu := floorCPU{controlPlane: b.controlPlaneCPU() - cp, client: selfCPU() - own}
	b.logf("%s: %.2fs, CPU: client %.2fs, control plane %.2fs; objects per second %s%s", label, d.Seconds(), cpu.client, cpu.controlPlane, f.timeline, f.detail)
	b.logf("%s: API server watches: %s", label, b.apiserver.watchSince(ctx, watch))
	b.apiserver.snapshot(ctx, phase+"-end")
	if err := clean(ctx); err != nil {
		return 0, floorCPU{}, fmt.Errorf("deleting the floor's objects: %w", err)
	}
	return d, cpu, b.settle(ctx, "after the floor")
}

// idle is scenario 4: with everything converged, oria must not write.
func (b *bench) idle(ctx context.Context) error {
	r := &Result{Name: scenarioIdle}
	b.report.Results = append(b.report.Results, r)
	if err := b.settle(ctx, "before idle"); err != nil {
		return err
	}
	b.logf("idle: counting oria's writes for %ds", b.cfg.idleSeconds)
	s, err := b.begin(ctx, r.Name)
	if err != nil {
		return err
	}
	before := b.apiserver.writes(ctx)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.oria.Done():
		return errors.New("oria exited")
	case <-time.After(time.Duration(b.cfg.idleSeconds) * time.Second):
	}
	if w := b.apiserver.writesSince(ctx, before); w != "" {
		b.logf("idle: the API server's writes meanwhile (by verb and resource): %s", w)
	}
	r.Converged = true
	return b.end(ctx, s, r)
}
