package gvisor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Boot bounds: how long a prepared sandbox may take to reach its script
// read, and how often boot looks.
const (
	bootWait = 2 * time.Minute
	bootPoll = 2 * time.Millisecond
)

// waitReady returns once the bootstrap blocks reading its script from the
// pipe whose inode is pipeIno, or fails when runsc exits first or ctx or
// bootWait ends.
//
// The Sentry tells it, not the bootstrap: runsc donates the pipe to the
// Sentry as a host descriptor, and the Sentry adds a host descriptor to its
// notifier's epoll set only while a task waits on it, that is, once the
// bootstrap's read found the pipe empty and blocked. So the sandbox is
// ready when, in a process of the sandbox's cgroup other than runsc run
// itself, an epoll descriptor watches the descriptor that holds the pipe
// (/proc/PID/fdinfo's "tfd:" lines). Nothing inside the sandbox is asked,
// and nothing it can observe changes.
func (s *sandbox) waitReady(ctx context.Context, pipeIno uint64) error {
	ctx, cancel := context.WithTimeout(ctx, bootWait)
	defer cancel()
	s.mu.Lock()
	runscPid, exitc := s.cmd.Process.Pid, s.exitc
	s.mu.Unlock()
	pipe := fmt.Sprintf("pipe:[%d]", pipeIno)
	tick := time.NewTicker(bootPoll)
	defer tick.Stop()
	for {
		ok, err := s.bootstrapWaits(runscPid, pipe)
		if ok || err != nil {
			return err
		}
		select {
		case <-exitc:
			return fmt.Errorf("runsc exited before the interpreter waited for its script: %s", s.exitReason())
		case <-ctx.Done():
			return fmt.Errorf("the interpreter did not wait for its script within %v: %w", bootWait, ctx.Err())
		case <-tick.C:
		}
	}
}

// bootstrapWaits reports whether a process of the sandbox's cgroup, other
// than runscPid, has an epoll descriptor that watches its descriptor for
// pipe.
func (s *sandbox) bootstrapWaits(runscPid int, pipe string) (bool, error) {
	for _, d := range s.cg.dirs {
		pids, err := cgroupProcs(d)
		if err != nil {
			return false, err
		}
		for _, pid := range pids {
			if pid != runscPid && epollWatches(pid, pipe) {
				return true, nil
			}
		}
	}
	return false, nil
}

// epollWatches reports whether process pid has an epoll descriptor whose
// interest list holds a descriptor of pid that is pipe. Errors (the
// process is gone, or not ours to read) are a no.
func epollWatches(pid int, pipe string) bool {
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	holds := map[string]bool{}
	var polls []string
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		switch {
		case err != nil:
		case l == pipe:
			holds[e.Name()] = true
		case l == "anon_inode:[eventpoll]":
			polls = append(polls, e.Name())
		}
	}
	if len(holds) == 0 {
		return false
	}
	for _, p := range polls {
		watched, err := epollTargets(filepath.Join("/proc", strconv.Itoa(pid), "fdinfo", p))
		if err != nil {
			continue
		}
		for _, fd := range watched {
			if holds[fd] {
				return true
			}
		}
	}
	return false
}

// epollTargets lists the descriptors an epoll descriptor's fdinfo file
// names ("tfd:" lines).
func epollTargets(fdinfo string) ([]string, error) {
	f, err := os.Open(fdinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "tfd:"); ok {
			if fs := strings.Fields(rest); len(fs) > 0 {
				out = append(out, fs[0])
			}
		}
	}
	return out, sc.Err()
}
