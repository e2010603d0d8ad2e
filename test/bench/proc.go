package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux fixes it
// at 100 for user space (USER_HZ), whatever the kernel's HZ.
const userHZ = 100

// parseStatCPU returns utime+stime in seconds from the text of
// /proc/<pid>/stat. The command name (field 2) may contain spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the command name", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat time %q: %w", s, err)
		}
		ticks += float64(v)
	}
	return ticks / userHZ, nil
}

// parseStatusKB returns the value in bytes of a "<key>:   123 kB" line of
// /proc/<pid>/status.
func parseStatusKB(status, key string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed %s line %q", key, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed %s line %q: %w", key, strings.TrimSpace(line), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s in /proc status", key)
}

func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

func procStatus(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(string(b), key)
}

// childPIDs returns the pids of this process's children whose command name
// is one of names (the control plane's etcd and kube-apiserver).
func childPIDs(names ...string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) || !slices.Contains(names, s[open+1:end]) {
			continue
		}
		if pid, err := strconv.Atoi(strings.Fields(s)[0]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sampler tracks the resident memory of a process between begin and end.
// The kernel's high-water mark (VmHWM) is reset at begin through
// /proc/<pid>/clear_refs, so the peak is exact; polling VmRSS backs it up
// where the reset is not allowed.
type sampler struct {
	pid int

	mu      sync.Mutex
	peak    int64 // bytes, since begin
	overall int64 // bytes, since start
	hwmOK   bool  // VmHWM was reset at begin
}

func newSampler(ctx context.Context, pid int, every time.Duration) *sampler {
	s := &sampler{pid: pid}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if rss, err := procStatus(pid, "VmRSS"); err == nil {
					s.observe(rss)
				}
			}
		}
	}()
	return s
}

func (s *sampler) observe(rss int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peak = max(s.peak, rss)
	s.overall = max(s.overall, rss)
}

// begin starts a measurement window.
func (s *sampler) begin() {
	err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.pid), []byte("5"), 0)
	rss, _ := procStatus(s.pid, "VmRSS")
	s.mu.Lock()
	s.peak, s.hwmOK = rss, err == nil
	s.mu.Unlock()
}

// end returns the peak resident memory in bytes since begin.
func (s *sampler) end() int64 {
	if rss, err := procStatus(s.pid, "VmRSS"); err == nil {
		s.observe(rss)
	}
	s.mu.Lock()
	ok := s.hwmOK
	s.mu.Unlock()
	if ok {
		if hwm, err := procStatus(s.pid, "VmHWM"); err == nil {
			s.observe(hwm)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// overallPeak returns the peak resident memory in bytes over the whole run.
func (s *sampler) overallPeak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overall
}
