package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// How `localcluster run` is stopped, as Ctrl-C stops it, whoever asks:
//
//   - Ctrl-C in a terminal signals the whole foreground process group: make,
//     this process and (before) the command;
//   - SIGINT or SIGTERM sent to this process alone;
//   - SIGTERM sent to make alone: make passes it on to its recipe, which is
//     this process (the recipe execs it);
//   - SIGINT sent to make alone (`kill -INT <make's pid>`): make does not
//     pass it on, it waits for its recipe; but it deletes the recipe's
//     target if the recipe changed it. `make run`'s recipe makes its target
//     the stop file, which this process creates and watches: its removal
//     stops everything as SIGINT does.
//
// The command (oria) runs in a process group of its own, so that it is
// asked to stop once, by this process: a second SIGINT makes oria's signal
// handler exit at once, without releasing its leader Lease. A signal after
// the first is passed on as it comes (Ctrl-C twice: stop now).

// pollInterval is how often the stop file is looked at.
const pollInterval = 200 * time.Millisecond

// stopper tells `run` when to stop: a signal, or the stop file's removal.
type stopper struct {
	file string
	sigs chan os.Signal
	// gone is closed when the stop file is removed; never without one.
	gone chan struct{}
	done chan struct{}
}

// newStopper starts listening for SIGINT and SIGTERM and, with file set,
// creates it afresh (a new modification time, which make compares) and
// watches it.
func newStopper(file string) (*stopper, error) {
	s := &stopper{file: file, sigs: make(chan os.Signal, 4), gone: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM)
	if file == "" {
		return s, nil
	}
	_ = os.Remove(file)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("creating the stop file: %w", err)
	}
	go s.watch()
	return s, nil
}

func (s *stopper) watch() {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if _, err := os.Stat(s.file); errors.Is(err, fs.ErrNotExist) {
				close(s.gone)
				return
			}
		}
	}
}

// close stops listening and removes the stop file.
func (s *stopper) close() {
	signal.Stop(s.sigs)
	close(s.done)
	if s.file != "" {
		_ = os.Remove(s.file)
	}
}

// context is cancelled by a signal or the stop file's removal, for what
// runs before the command (the cluster's start); cancel releases it.
func (s *stopper) context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.sigs:
		case <-s.gone:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// run runs argv with env until it exits, asking it to stop as described
// above, and returns its error.
func (s *stopper) run(argv, env []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	gone := s.gone
	signalled := false
	var fileStop time.Time
	for {
		select {
		case err := <-exited:
			return err
		case sig := <-s.sigs:
			if sig == os.Interrupt && !fileStop.IsZero() && time.Since(fileStop) < time.Second {
				continue // the same Ctrl-C, seen first as make's removal of the file
			}
			signalled = true
			_ = cmd.Process.Signal(sig)
		case <-gone:
			gone = nil
			if signalled {
				continue // make removed it on the Ctrl-C already passed on
			}
			fmt.Fprintf(os.Stderr, "localcluster: %s was removed (make got SIGINT): stopping\n", s.file)
			fileStop = time.Now()
			_ = cmd.Process.Signal(os.Interrupt)
		}
	}
}
