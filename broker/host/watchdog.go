package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/mountinfo"
	"github.com/awf-project/awf/proto"
)

// The watchdog is a tiny process that awf run starts before anything of the
// run exists, in its own session (so a job runner's kill of awf's process
// group does not reach it), holding the read end of a pipe whose only
// writer is awf run. Parent-death signals cover awf's direct children, but
// not what they started (sandboxes, runsc, staging's git) nor the mounts,
// cgroups and files of the run: when awf run dies without saying "done" on
// the pipe, the kernel closes the write end and the watchdog kills every
// process and cgroup of the run and reclaims it at once, instead of leaving
// it to the next run's start-up sweep, which may never come on an
// ephemeral runner.

// WatchdogFlag is the hidden mode of "awf run" that runs the watchdog.
const WatchdogFlag = "--watchdog"

// watchdogDone is what awf run writes on the pipe after a complete teardown.
const watchdogDone = "done\n"

// WatchdogReclaimTimeout bounds the watchdog's whole reclaim.
const WatchdogReclaimTimeout = 30 * time.Second

// Watchdog is awf run's handle on its watchdog process.
type Watchdog struct {
	cmd    *exec.Cmd
	w      *os.File
	exited chan struct{}
}

// StartWatchdog starts exe in its watchdog mode for the run of layout l.
// Its messages go to logw.
func StartWatchdog(exe string, l Layout, logw io.Writer) (*Watchdog, error) {
	if err := proto.ValidateRunID(l.RunID); err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	defer pr.Close()
	cmd := exec.Command(exe, "run", WatchdogFlag, l.PrivateBase, l.IngressBase, filepath.Dir(l.AuditArchive), l.RunID)
	cmd.Env = brokerEnv()
	cmd.Dir = "/"
	cmd.Stderr = logw
	cmd.ExtraFiles = []*os.File{pr}
	// Its own session: neither a terminal's nor a runner's signal to awf's
	// process group reaches it, and no parent-death signal: it must
	// outlive awf.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("watchdog: start: %w", err)
	}
	w := &Watchdog{cmd: cmd, w: pw, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.exited) }()
	return w, nil
}

// Release tells the watchdog that the run is torn down and waits (briefly)
// for it to exit. Without a Release the watchdog reclaims the run.
func (w *Watchdog) Release() {
	if w == nil {
		return
	}
	_, _ = io.WriteString(w.w, watchdogDone)
	_ = w.w.Close()
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}

// Abandon closes the pipe without "done": the watchdog reclaims the run
// exactly as if awf run had been killed (tests use it).
func (w *Watchdog) Abandon() {
	if w == nil {
		return
	}
	_ = w.w.Close()
	<-w.exited
}

// RunWatchdog is the watchdog process: it blocks on the pipe from awf run
// and, unless awf run said "done", reclaims the run. It reports what it
// did on logw.
func RunWatchdog(pipe io.Reader, privateBase, ingressBase, auditArchive, runID string, logw io.Writer) error {
	if err := proto.ValidateRunID(runID); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	b, _ := io.ReadAll(io.LimitReader(pipe, 64))
	if string(b) == watchdogDone {
		return nil
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), WatchdogReclaimTimeout)
	defer cancel()
	l := NewLayout(runID, privateBase, ingressBase, auditArchive)
	err := ReclaimRun(ctx, l)
	took := time.Since(began).Round(time.Millisecond)
	if err != nil {
		fmt.Fprintf(logw, "awf: watchdog: run %s (after %v): %v\n", runID, took, err)
		return err
	}
	fmt.Fprintf(logw, "awf: watchdog: awf run ended without its teardown; run %s reclaimed in %v\n", runID, took)
	return nil
}

// ReclaimRun kills every process and cgroup of the run l whose awf run is
// gone, then sweeps its runtime, removes its agent cgroup and removes its
// files (as the orphan sweep does).
func ReclaimRun(ctx context.Context, l Layout) error {
	var errs []error
	if err := KillRun(ctx, l.RunID, nil); err != nil {
		errs = append(errs, err)
	}
	// awf run's lock is released with its last fd; wait for it briefly (a
	// just-killed process may take a moment to close its files).
	lock, err := waitRunLock(ctx, l.LockPath, 2*time.Second)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
		return errors.Join(errs...)
	}
	if _, err := os.Stat(l.PrivateRoot); errors.Is(err, os.ErrNotExist) {
		if lock != nil {
			lock.Close()
		}
		if err := os.RemoveAll(l.IngressRoot); err != nil {
			errs = append(errs, err)
		}
		if ag, err := orphanAgentCgroup(l.RunID); err == nil {
			errs = append(errs, RemoveAgentCgroup(ctx, ag))
		}
		return errors.Join(errs...)
	}
	if err := reclaimRoot(ctx, l, lock); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// waitRunLock takes the run lock at path, polling until wait has passed.
func waitRunLock(ctx context.Context, path string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("run lock %s is still held", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// KillRun kills every process of run runID: every process in a cgroup whose
// name carries the run id, in every hierarchy (v2: cgroup.kill; v1: the
// freezer leaf is frozen so nothing forks, every task is sent SIGKILL, and
// the leaf is thawed so the kills land), then every other process whose
// command line or environment names the run (staging's git, runsc's
// gofer, an agent shim not yet in its cgroup), except the caller. keep, when
// set, says which cgroup directories to leave alone, and then only cgroups
// are searched (the survivor's case: the agent, whose environment names the
// run, lives on). It returns once the cgroups are empty, or with an error
// when ctx ends first.
func KillRun(ctx context.Context, runID string, keep func(dir string) bool) error {
	if err := proto.ValidateRunID(runID); err != nil {
		return fmt.Errorf("kill run: %w", err)
	}
	self := os.Getpid()
	for {
		dirs, err := RunCgroups(runID)
		if err != nil {
			return fmt.Errorf("kill run %s: %w", runID, err)
		}
		if keep != nil {
			kept := dirs[:0]
			for _, d := range dirs {
				if !keep(d) {
					kept = append(kept, d)
				}
			}
			dirs = kept
		}
		left := 0
		var frozen []string
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "freezer.state")); err == nil {
				if os.WriteFile(filepath.Join(d, "freezer.state"), []byte("FROZEN"), 0) == nil {
					frozen = append(frozen, d)
				}
			}
		}
		for _, d := range dirs {
			if os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0) == nil {
				continue
			}
			for _, pid := range cgroupPids(d) {
				if pid != self {
					_ = unix.Kill(pid, unix.SIGKILL)
					left++
				}
			}
		}
		for _, d := range frozen {
			_ = os.WriteFile(filepath.Join(d, "freezer.state"), []byte("THAWED"), 0)
		}
		if keep == nil {
			for _, pid := range runProcesses(runID, self) {
				_ = unix.Kill(pid, unix.SIGKILL)
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kill run %s: %d processes left: %w", runID, left, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// KillSandboxesIfBrokerDies kills the run's sandboxes once the broker
// process has ended: a broker killed mid-query would otherwise leave its
// sandbox running (and holding its mounts) until teardown. The agent's
// cgroup is left alone. After a normal stop it finds nothing to do.
// Teardown waits for it before its sweep. Call it once, before Teardown.
func KillSandboxesIfBrokerDies(b *BrokerProc, a AgentCgroup) {
	if b == nil || a.RunID == "" {
		return
	}
	agent := map[string]bool{}
	for _, d := range a.Dirs() {
		agent[d] = true
	}
	b.killerDone = make(chan struct{})
	go func() {
		defer close(b.killerDone)
		<-b.Exited()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = KillRun(ctx, a.RunID, func(d string) bool {
			for p := range agent {
				if d == p || strings.HasPrefix(d, p+"/") {
					return true
				}
			}
			return false
		})
	}()
}

// cgroupPids lists the processes of cgroup dir d (cgroup.procs, or tasks).
func cgroupPids(d string) []int {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		b, _ = os.ReadFile(filepath.Join(d, "tasks"))
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// runProcesses lists the processes other than self whose command line or
// environment carries runID.
func runProcesses(runID string, self int) []int {
	ents, _ := os.ReadDir("/proc")
	id := []byte(runID)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if err == nil && bytes.Contains(b, id) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// RunCgroups lists every cgroup directory, in every mounted hierarchy,
// whose name carries runID, deepest first (the order they can be removed
// in). It fails when the mount table cannot be read: an empty list would
// pass for a run that left nothing.
func RunCgroups(runID string) ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		_ = filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(strings.TrimPrefix(p, m), "/") > 6 {
				return filepath.SkipDir
			}
			if strings.Contains(d.Name(), runID) {
				out = append(out, subdirs(p)...)
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out, nil
}

// subdirs returns d and every directory below it, deepest first.
func subdirs(d string) []string {
	var all []string
	_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			all = append(all, p)
		}
		return nil
	})
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all
}

// cgroupMounts lists the mount points of every cgroup and cgroup2
// hierarchy.
func cgroupMounts() ([]string, error) {
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return nil, fmt.Errorf("cgroup hierarchies: %w", err)
	}
	var out []string
	for _, m := range ms {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && !slices.Contains(out, m.Point) {
			out = append(out, m.Point)
		}
	}
	return out, nil
}

// removeRunCgroups removes every (empty) cgroup directory of the run.
func removeRunCgroups(ctx context.Context, runID string) error {
	dirs, err := RunCgroups(runID)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		for {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}
