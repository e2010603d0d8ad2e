package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// The restart scenario (issue 34; not in all): with the world of
// restart_setup.go in place, oria is
//   - restarted (restart): SIGTERM, then the same binary started again;
//   - handed over between two replicas with leader election (takeover-kill:
//     the leader killed, SIGKILL, no Lease release; takeover-stop: the
//     leader stopped gracefully, SIGTERM, the Lease released),
//
// -restart-runs times each. Each run's time is from the signal to the
// moment the process that carries on says its first full pass is done for
// every kind (oria_first_pass_done, internal/firstpass): everything that
// existed has been reconciled once since it started leading. Its writes
// are the RBAC objects its engine wrote (oria_writes_total) and every
// change the API server saw meanwhile to what oria may write (changes.go),
// counted until the cluster is quiet again: both must be 0.

// Scenario names of the restart scenario's rows.
const (
	scenarioRestart      = "restart" // the scenario, and its first row
	scenarioTakeoverKill = "takeover-kill"
	scenarioTakeoverStop = "takeover-stop"
)

// RestartRun is one run of a restart or takeover row, in seconds from the
// signal to the running oria (the leader).
type RestartRun struct {
	// Seconds: the first full pass done, every kind.
	Seconds float64 `json:"seconds"`
	// Stopped: the signalled process exited.
	Stopped float64 `json:"stopped"`
	// Ready (restart): the new process ready; Leading (takeovers): the
	// other replica leads.
	Ready   float64 `json:"ready,omitempty"`
	Leading float64 `json:"leading,omitempty"`
	// PassSeconds is oria's own oria_first_pass_seconds: from the moment
	// it started leading to the end of its slowest kind's pass.
	PassSeconds float64 `json:"passSeconds"`
	// EngineWrites is the process's oria_writes_total meanwhile, Changes
	// the changes the API server saw by resource.
	EngineWrites int            `json:"engineWrites"`
	Changes      map[string]int `json:"changes,omitempty"`
	// PeakRSS is the peak memory of the process that carried on.
	PeakRSS int64 `json:"peakRSSBytes"`
}

// writes is what the run wrote: the engine's writes and the changes seen.
func (x RestartRun) writes() int { return x.EngineWrites + total(x.Changes) }

func (x RestartRun) String() string {
	s := fmt.Sprintf("all reconciled after %s (process gone %s", fmtSeconds(x.Seconds), fmtSeconds(x.Stopped))
	if x.Ready > 0 {
		s += ", new one ready " + fmtSeconds(x.Ready)
	}
	if x.Leading > 0 {
		s += ", other leading " + fmtSeconds(x.Leading)
	}
	return s + fmt.Sprintf(", pass %s from leading); writes: engine %d, API changes %s; peak RSS %s",
		fmtSeconds(x.PassSeconds), x.EngineWrites, fmtCounts(x.Changes), fmtMB(x.PeakRSS))
}

// restart runs the scenario: setup, the restart row, the takeover rows.
func (b *bench) restart(ctx context.Context) error {
	if err := b.setupRestart(ctx); err != nil {
		return err
	}
	counts, err := b.managedCounts(ctx)
	if err != nil {
		return err
	}
	b.logf("restart: oria holds %s, and %d ClusterExtensions", describeCounts(counts), b.cfg.at.RestartExtensions)
	objects := bindingsHeld(counts)
	r := &Result{Name: scenarioRestart, Objects: objects}
	b.report.Results = append(b.report.Results, r)
	for i := range b.cfg.at.RestartRuns {
		run, err := b.restartRun(ctx, i)
		if err != nil {
			r.Error = err.Error()
			return err
		}
		b.logf("restart %d: %s", i+1, run)
		r.Runs = append(r.Runs, run)
	}
	finishRuns(r, b.cfg.at.RestartRuns)
	return b.takeovers(ctx, objects)
}

// restartRun stops oria, starts it again and waits for its first full
// pass.
func (b *bench) restartRun(ctx context.Context, i int) (RestartRun, error) {
	if err := b.settle(ctx, "before a restart"); err != nil {
		return RestartRun{}, err
	}
	cc, err := countChanges(ctx, b.watch.md, changeTargets())
	if err != nil {
		return RestartRun{}, err
	}
	t0 := time.Now()
	since := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	b.oria.Stop()
	run := RestartRun{Stopped: since(time.Now())}
	p, err := b.launchOria(fmt.Sprintf("oria-restart-%d.log", i+1))
	if err != nil {
		cc.stop()
		return run, err
	}
	name := fmt.Sprintf("%s-%d", scenarioRestart, i+1)
	p.startCPUProfileAtStart(ctx, name) // -profile
	defer p.saveHeapProfile(ctx, name)
	b.follow(ctx, p)
	if err := p.WaitReady(ctx, b.cfg.timeout); err != nil {
		cc.stop()
		return run, err
	}
	run.Ready = since(time.Now())
	done, err := waitLog(ctx, p, b.cfg.timeout, "the first full pass after the restart", doneMarker)
	if err != nil {
		cc.stop()
		return run, err
	}
	run.Seconds = since(done)
	return run, b.finishRun(ctx, cc, &run, 0)
}

// finishRun waits until the cluster is quiet (a late write counts), then
// stops counting changes and fills run's writes and memory; before is the
// process's engine writes at the start of the run.
func (b *bench) finishRun(ctx context.Context, cc *changeCounter, run *RestartRun, before int) error {
	err := b.waitQuiet(ctx, "after the first full pass")
	changes, examples, errs := cc.stop()
	if err != nil {
		return err
	}
	for _, e := range errs {
		b.warn("counting changes: %s", e)
	}
	if len(examples) > 0 {
		b.logf("changes seen: %v", examples)
	}
	w, err := engineWrites(ctx, b.oria)
	if err != nil {
		return err
	}
	if run.PassSeconds, err = passSeconds(ctx, b.oria); err != nil {
		return err
	}
	run.EngineWrites, run.Changes, run.PeakRSS = w-before, changes, b.mem.end()
	return nil
}

// takeovers runs the two takeover rows on two replicas with leader
// election, and starts the benchmark's oria again at the end.
func (b *bench) takeovers(ctx context.Context, objects int) (retErr error) {
	rs, err := b.startReplicas(ctx)
	defer func() {
		if rs != nil {
			retErr = errors.Join(retErr, b.stopReplicas(ctx, rs))
		}
	}()
	if err != nil {
		return err
	}
	runs := b.cfg.at.RestartRuns
	for n, row := range []struct {
		name string
		kill bool
	}{{scenarioTakeoverKill, true}, {scenarioTakeoverStop, false}} {
		r := &Result{Name: row.name, Objects: objects}
		b.report.Results = append(b.report.Results, r)
		for i := range runs {
			last := n == 1 && i == runs-1
			run, err := b.takeoverRun(ctx, rs, fmt.Sprintf("%s-%d", row.name, i+1), row.kill, !last)
			if err != nil {
				r.Error = err.Error()
				return err
			}
			b.logf("%s %d: %s", row.name, i+1, run)
			r.Runs = append(r.Runs, run)
		}
		finishRuns(r, runs)
	}
	return nil
}

// takeoverRun kills or stops the leader and waits for the other replica's
// first full pass; with replace, a new replica takes the place of the one
// that went (untimed).
func (b *bench) takeoverRun(ctx context.Context, rs *replicaSet, name string, kill, replace bool) (RestartRun, error) {
	leader, standby := rs.procs[rs.leader], rs.procs[1-rs.leader]
	if err := b.settle(ctx, "before a takeover"); err != nil {
		return RestartRun{}, err
	}
	cc, err := countChanges(ctx, b.watch.md, changeTargets())
	if err != nil {
		return RestartRun{}, err
	}
	before, err := engineWrites(ctx, standby)
	if err != nil {
		cc.stop()
		return RestartRun{}, err
	}
	b.follow(ctx, standby)
	standby.startCPUProfile(ctx, name) // -profile
	defer standby.saveHeapProfile(ctx, name)
	t0 := time.Now()
	since := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := leader.Cmd.Process.Signal(sig); err != nil {
		cc.stop()
		return RestartRun{}, err
	}
	exited := make(chan time.Time, 1)
	go func() { <-leader.Done(); exited <- time.Now() }()
	var run RestartRun
	at, err := waitLog(ctx, standby, b.cfg.timeout, "the other replica leading", leadingMarker)
	if err == nil {
		run.Leading = since(at)
		at, err = waitLog(ctx, standby, b.cfg.timeout, "the first full pass after the takeover", doneMarker)
		run.Seconds = since(at)
	}
	select {
	case t := <-exited:
		run.Stopped = since(t)
	case <-time.After(time.Minute):
		err = errors.Join(err, errors.New("the leader did not exit within a minute of its signal"))
	}
	if err != nil {
		cc.stop()
		return run, err
	}
	if err := b.finishRun(ctx, cc, &run, before); err != nil {
		return run, err
	}
	gone := rs.leader
	rs.leader = 1 - rs.leader
	if replace {
		return run, b.startReplica(ctx, rs, gone)
	}
	return run, nil
}

// finishRuns fills a row of runs: the median and the slowest time (the
// nearest-rank p99 of three is the slowest), the writes of every run, the
// highest peak memory; converged when every one of want runs finished.
func finishRuns(r *Result, want int) {
	var times []time.Duration
	r.WritesTotal = 0
	for _, x := range r.Runs {
		times = append(times, time.Duration(x.Seconds*float64(time.Second)))
		r.WritesTotal += x.writes()
		r.PeakRSS = max(r.PeakRSS, x.PeakRSS)
	}
	r.Converged = r.Error == "" && len(r.Runs) == want
	if len(times) > 0 {
		r.Latency = newLatency(times)
		r.Seconds = r.Latency.P50
	}
}
