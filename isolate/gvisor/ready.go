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

	"github.com/awf-project/awf/isolate/cgroupfs"
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
	w := &pipeWatch{cgroup: s.cg.memoryDir(), runscPid: runscPid, pipe: fmt.Sprintf("pipe:[%d]", pipeIno)}
	tick := time.NewTicker(bootPoll)
	defer tick.Stop()
	for {
		if w.waits() {
			return nil
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

// rescanEvery is how many polls reuse one listing of the watched
// process's descriptors before it is listed again (its epoll set may be
// made after the first listing).
const rescanEvery = 16

// pipeWatch finds the process of the sandbox's memory cgroup (runsc joins
// the sandbox to every hierarchy; memory is one it must) that holds the pipe, and looks whether one of
// its epoll descriptors watches it. It keeps what it found between polls,
// so that a poll reads one or two small files, not every descriptor.
type pipeWatch struct {
	cgroup   string
	runscPid int
	pipe     string

	pid   int             // the process that holds the pipe, 0 until found
	holds map[string]bool // its descriptors for the pipe
	polls []string        // its epoll descriptors
	polln int
}

// waits reports whether the pipe is in an epoll set of the process that
// holds it.
func (w *pipeWatch) waits() bool {
	if w.pid == 0 || w.polln%rescanEvery == 0 {
		w.find()
	}
	w.polln++
	if w.pid == 0 {
		return false
	}
	for _, p := range w.polls {
		watched, err := epollTargets(filepath.Join("/proc", strconv.Itoa(w.pid), "fdinfo", p))
		if err != nil {
			continue
		}
		for _, fd := range watched {
			if w.holds[fd] {
				return true
			}
		}
	}
	return false
}

// find lists the descriptors of the cgroup's processes (or, once found, of
// the one that holds the pipe).
func (w *pipeWatch) find() {
	pids := []int{w.pid}
	if w.pid == 0 {
		pids, _ = cgroupfs.Procs(w.cgroup)
	}
	w.pid, w.holds, w.polls = 0, nil, nil
	for _, pid := range pids {
		if pid == w.runscPid {
			continue
		}
		holds, polls := descriptors(pid, w.pipe)
		if len(holds) > 0 {
			w.pid, w.holds, w.polls = pid, holds, polls
			return
		}
	}
}

// descriptors lists process pid's descriptors for pipe and its epoll
// descriptors. A process that is gone, or not ours to read, has none.
func descriptors(pid int, pipe string) (holds map[string]bool, polls []string) {
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, nil
	}
	holds = map[string]bool{}
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
	return holds, polls
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
