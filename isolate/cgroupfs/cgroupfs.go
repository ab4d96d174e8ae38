// Package cgroupfs holds the cgroup-file primitives the sandbox backends
// share: the one place that knows which file and key of a cgroup say that
// the OOM killer fired or that the pids limit refused a fork (on cgroup v1
// and v2), how a cgroup lists its processes, and how a cgroup directory is
// emptied and removed under a deadline, and how a cgroup v2 directory hands
// controllers to its children. It creates no cgroup: each backend places its
// cgroups its own way (direct through libcontainer, gvisor by itself).
package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Events are the limit events of one cgroup.
type Events struct {
	OOMKills int64 // processes the kernel OOM-killed
	PidsMax  int64 // forks refused by the pids limit
}

// ReadEvents reads the events of the cgroup whose memory controller
// directory is memDir and whose pids controller directory is pidsDir (the
// same directory on v2). A counter it cannot read is zero and its error is
// joined into the result, so a caller that must not miss a limit fails on
// any error, and one that cannot do better still gets the other counter.
func ReadEvents(v2 bool, memDir, pidsDir string) (Events, error) {
	memFile := "memory.oom_control"
	if v2 {
		memFile = "memory.events"
	}
	var e Events
	var memErr, pidsErr error
	e.OOMKills, memErr = Counter(filepath.Join(memDir, memFile), "oom_kill")
	e.PidsMax, pidsErr = Counter(filepath.Join(pidsDir, "pids.events"), "max")
	return e, errors.Join(memErr, pidsErr)
}

// Counter reads the value of key from the flat-keyed cgroup file at path
// (lines "key value"); 0 and an error when the file, the key or a number
// is missing.
func Counter(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup counter: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cgroup counter %s in %s: %w", key, path, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("cgroup counter: no %s in %s", key, path)
}

// Procs lists the processes of the cgroup directory d; none when d has no
// cgroup.procs (it is gone).
func Procs(d string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup: read %s/cgroup.procs: %w", d, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// Remove kills the tasks in the cgroup directory d until none is left,
// then removes d, retrying while the kernel still counts it busy, until
// ctx ends. A d that does not exist is removed already.
func Remove(ctx context.Context, d string) error {
	if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// cgroup v2 can kill the whole cgroup in one write.
	_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0o644)
	for {
		pids, err := Procs(d)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		err = unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("cgroup: remove %s: %w", d, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup: remove %s: %d tasks left: %w", d, len(pids), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// SandboxControllers returns the controllers that limit every sandbox's
// cgroup (memory, pids, cpu), a new slice each call: the backends enable
// them (v2) or require their hierarchies (v1), and verify fails a host that
// lacks one. A sandbox pinned to CPUs needs cpuset too.
func SandboxControllers() []string { return []string{"memory", "pids", "cpu"} }

// EnableControllers makes each of ctrls (cgroup v2 controller names, such
// as "memory" or "cpuset") available to the children of the cgroup
// directory dir. It fails, naming the controller, when dir's
// cgroup.controllers does not offer one (dir's parent did not enable it, or
// the kernel lacks it), and writes to dir's cgroup.subtree_control only the
// controllers not enabled there yet, in one write, so that a directory
// already set up is left untouched. A controller must be enabled in every
// ancestor of the cgroup that uses it: call it for each, from the top down.
func EnableControllers(dir string, ctrls ...string) error {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup: controllers of %s: %w", dir, err)
	}
	on, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("cgroup: controllers of %s: %w", dir, err)
	}
	offered, enabled := strings.Fields(string(avail)), strings.Fields(string(on))
	var add []string
	for _, c := range ctrls {
		if !slices.Contains(offered, c) {
			return fmt.Errorf("cgroup: controller %s is not available in %s (offered: %q)", c, dir, strings.TrimSpace(string(avail)))
		}
		if !slices.Contains(enabled, c) && !slices.Contains(add, "+"+c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0o644); err != nil {
		return fmt.Errorf("cgroup: enable %s in %s: %w", strings.Join(add, " "), dir, err)
	}
	return nil
}
