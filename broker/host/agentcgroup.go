package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/proto"
)

// The agent's cgroups. While a query against a metered repository runs, the
// broker freezes the agent's whole process tree (cgroup freezer), so that it
// cannot time the sandbox through anything they share; and on a host with two
// or more CPUs the agent is confined to CPUs that no sandbox uses (cpuset),
// so that a live public query cannot be timed through a shared core either.
// This file owns both: the CPU split, the agent's cgroups, and the freezer.
// It does not decide when to freeze (broker.Options.Freezer does), and it
// does not move the agent in (the shim joins the directories it is given).

const cgroupRoot = cgroupfs.Root

// agentParentSuffix names the agent cgroups' parent next to the sandboxes'
// parent: "<cgroupParent>-agent/<runID>".
const agentParentSuffix = "-agent"

// CPUSplit divides the CPUs awf may use between the agent and the query
// sandboxes (the broker runs on the sandbox side too). Both are kernel CPU
// lists ("0-2,5"), disjoint; both are empty on a one-CPU host, where there
// is nothing to split.
type CPUSplit struct {
	Agent   string
	Sandbox string
}

// SplitCPUs splits the CPUs this process may run on (its affinity, so an
// operator's taskset or cpuset is respected): the sandboxes get the last
// quarter (at least one CPU: one sandbox runs at a time, under a CPU quota),
// the agent gets the rest.
func SplitCPUs() (CPUSplit, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return CPUSplit{}, fmt.Errorf("cpu split: sched_getaffinity: %w", err)
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return splitCPUList(cpus), nil
}

// splitCPUList is SplitCPUs on a sorted list of CPU numbers.
func splitCPUList(cpus []int) CPUSplit {
	if len(cpus) < 2 {
		return CPUSplit{}
	}
	n := max(1, (len(cpus)+3)/4)
	return CPUSplit{Agent: formatCPUs(cpus[:len(cpus)-n]), Sandbox: formatCPUs(cpus[len(cpus)-n:])}
}

// formatCPUs renders sorted CPU numbers as a kernel CPU list.
func formatCPUs(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// maxCPUs bounds the CPU numbers ParseCPUs accepts: the kernel's largest
// NR_CPUS. A larger number is not a CPU of this host, and a range up to it
// would allocate without limit.
const maxCPUs = 8192

// ParseCPUs reads a kernel CPU list ("0-2,5") into sorted CPU numbers, each
// below maxCPUs.
func ParseCPUs(list string) ([]int, error) {
	var out []int
	list = strings.TrimSpace(list)
	if list == "" {
		return nil, nil
	}
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, ok := cpuNumber(lo)
		if !ok {
			return nil, fmt.Errorf("cpu list %q: bad entry %q", list, part)
		}
		b := a
		if isRange {
			if b, ok = cpuNumber(hi); !ok || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", list, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// cpuNumber reads one CPU number of a kernel CPU list: decimal digits only
// (no sign, no space), below maxCPUs.
func cpuNumber(s string) (int, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s) // an overflow is an error
	return n, err == nil && n < maxCPUs
}

// String is the split as the operator reads it.
func (s CPUSplit) String() string {
	if s.Sandbox == "" {
		return "one CPU: agent and sandboxes share it"
	}
	return fmt.Sprintf("agent on CPUs %s, sandboxes and broker on CPUs %s", s.Agent, s.Sandbox)
}

// AgentCgroup is where one run's agent lives. awf run plans it before the
// broker's spec is written (so the broker knows it), creates it before the
// agent starts, and removes it at teardown; a crashed run's is found by its
// run id (SweepOrphans).
type AgentCgroup struct {
	RunID string
	// Mode is the cgroup mode (cgroupfs.Mode) the paths were made for.
	Mode string
	// FreezerDir is the leaf whose freezer stops the agent: the v1 freezer
	// leaf, or the v2 leaf.
	FreezerDir string
	// CpusetDir is the leaf that confines the agent's CPUs: the v1 cpuset
	// leaf, or the v2 leaf (then equal to FreezerDir).
	CpusetDir string
	// CPUs is the run's split; the agent gets CPUs.Agent.
	CPUs CPUSplit
}

// v2 reports whether the agent cgroup is one cgroup v2 leaf.
func (a AgentCgroup) v2() bool { return !cgroupfs.IsV1(a.Mode) }

// Dirs are the leaves the agent shim joins (it writes its pid into each
// cgroup.procs before anything else).
func (a AgentCgroup) Dirs() []string {
	if a.FreezerDir == "" {
		return nil
	}
	if a.CpusetDir == "" || a.CpusetDir == a.FreezerDir {
		return []string{a.FreezerDir}
	}
	return []string{a.FreezerDir, a.CpusetDir}
}

// PlanAgentCgroup computes the agent's cgroup paths and the CPU split for
// run runID, whose sandboxes use the parent cgroup parent. It creates
// nothing.
func PlanAgentCgroup(runID, parent string) (AgentCgroup, error) {
	if err := proto.ValidateRunID(runID); err != nil {
		return AgentCgroup{}, fmt.Errorf("agent cgroup: %w", err)
	}
	split, err := SplitCPUs()
	if err != nil {
		return AgentCgroup{}, err
	}
	parents, mode, err := agentParents(parent, false)
	if err != nil {
		return AgentCgroup{}, err
	}
	a := AgentCgroup{RunID: runID, Mode: mode, CPUs: split}
	if cgroupfs.IsV1(mode) {
		a.FreezerDir = filepath.Join(parents[0], runID)
		a.CpusetDir = filepath.Join(parents[1], runID)
	} else {
		a.FreezerDir = filepath.Join(parents[0], runID)
		a.CpusetDir = a.FreezerDir
	}
	return a, nil
}

// agentParents returns the agent cgroups' parent directories for the host's
// cgroup mode: on v1 the freezer one and the cpuset one, on v2 the one. With
// claim on a delegated v2 host, the broker's processes first move into the
// supervisor leaf (cgroupfs.V2Base), as the sandboxes' parent needs too.
func agentParents(parent string, claim bool) ([]string, string, error) {
	mode, err := cgroupfs.Mode()
	if err != nil {
		return nil, "", fmt.Errorf("agent cgroup: %w", err)
	}
	name := parent + agentParentSuffix
	if cgroupfs.IsV1(mode) {
		var out []string
		for _, ctrl := range []string{"freezer", "cpuset"} {
			m, err := cgroups.FindCgroupMountpoint("", ctrl)
			if err != nil {
				return nil, "", fmt.Errorf("agent cgroup: no v1 %s hierarchy: %w", ctrl, err)
			}
			out = append(out, filepath.Join(m, name))
		}
		return out, mode, nil
	}
	base, err := cgroupfs.V2Base(claim)
	if err != nil {
		return nil, "", fmt.Errorf("agent cgroup: %w", err)
	}
	return []string{filepath.Join(cgroupRoot, base, name)}, mode, nil
}

// CreateAgentCgroup creates the planned leaves (parents 0700) and confines
// the cpuset leaf to the agent's CPUs. On error it removes what it made.
func CreateAgentCgroup(ctx context.Context, a AgentCgroup) (err error) {
	if a.FreezerDir == "" {
		return errors.New("agent cgroup: nothing planned")
	}
	mode, err := cgroupfs.Mode()
	if err != nil {
		return fmt.Errorf("agent cgroup: %w", err)
	}
	if mode != a.Mode {
		return fmt.Errorf("agent cgroup: planned for cgroup mode %s, host is %s", a.Mode, mode)
	}
	defer func() {
		if err != nil {
			_ = RemoveAgentCgroup(context.WithoutCancel(ctx), a)
		}
	}()
	if a.v2() {
		return createV2Agent(a)
	}
	return createV1Agent(a)
}

func createV1Agent(a AgentCgroup) error {
	for _, d := range []string{a.FreezerDir, a.CpusetDir} {
		if err := mkdirPrivate(filepath.Dir(d)); err != nil {
			return err
		}
	}
	// A new v1 cpuset starts empty and cannot take tasks: the parent gets
	// the hierarchy root's CPUs and memory nodes, the leaf the agent's CPUs.
	cp := filepath.Dir(a.CpusetDir)
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		if err := copyIfEmpty(cp, filepath.Dir(cp), f); err != nil {
			return err
		}
	}
	for _, d := range []string{a.FreezerDir, a.CpusetDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("agent cgroup: %w", err)
		}
	}
	if err := copyIfEmpty(a.CpusetDir, cp, "cpuset.mems"); err != nil {
		return err
	}
	cpus := a.CPUs.Agent
	if cpus == "" {
		return copyIfEmpty(a.CpusetDir, cp, "cpuset.cpus")
	}
	return writeCgroup(a.CpusetDir, "cpuset.cpus", cpus)
}

func createV2Agent(a AgentCgroup) error {
	rel, err := cgroupfs.V2Base(true)
	if err != nil {
		return fmt.Errorf("agent cgroup: %w", err)
	}
	parent := filepath.Dir(a.FreezerDir)
	base := filepath.Dir(parent)
	if want := filepath.Join(cgroupRoot, rel); want != base {
		return fmt.Errorf("agent cgroup: planned below %s, but awf's cgroups belong below %s", base, want)
	}
	if a.CPUs.Agent != "" {
		// cgroup.freeze needs no controller; the cpuset does, in every
		// ancestor's subtree_control.
		if err := cgroupfs.EnableControllers(base, "cpuset"); err != nil {
			return fmt.Errorf("agent cgroup: the agent cannot be kept off the sandboxes' CPUs: %w", err)
		}
	}
	if err := mkdirPrivate(parent); err != nil {
		return err
	}
	if a.CPUs.Agent != "" {
		if err := cgroupfs.EnableControllers(parent, "cpuset"); err != nil {
			return fmt.Errorf("agent cgroup: %w", err)
		}
	}
	if err := os.Mkdir(a.FreezerDir, 0o700); err != nil {
		return fmt.Errorf("agent cgroup: %w", err)
	}
	if a.CPUs.Agent != "" {
		return writeCgroup(a.FreezerDir, "cpuset.cpus", a.CPUs.Agent)
	}
	return nil
}

// mkdirPrivate creates a parent cgroup closed to other users (defence in
// depth: cgroup files are world-readable), and closes an existing one.
func mkdirPrivate(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("agent cgroup: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("agent cgroup: %w", err)
	}
	return nil
}

func copyIfEmpty(dir, from, file string) error {
	if cur, err := os.ReadFile(filepath.Join(dir, file)); err == nil && strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(from, file))
	if err != nil {
		return fmt.Errorf("agent cgroup: %w", err)
	}
	return writeCgroup(dir, file, strings.TrimSpace(string(b)))
}

func writeCgroup(dir, file, v string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
		return fmt.Errorf("agent cgroup: write %q to %s: %w", v, filepath.Join(dir, file), err)
	}
	return nil
}

func fieldsOf(p string) []string {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// RemoveAgentCgroup thaws the agent's leaves, kills whatever is left in them
// and removes them, retrying until ctx ends. The shared parents stay.
func RemoveAgentCgroup(ctx context.Context, a AgentCgroup) error {
	if a.FreezerDir == "" {
		return nil
	}
	if _, err := os.Stat(a.FreezerDir); err == nil {
		// A frozen v1 task cannot die: thaw first.
		tctx, cancel := context.WithTimeout(ctx, broker.DefaultThawTimeout)
		_ = a.Freezer().Thaw(tctx)
		cancel()
	}
	var errs []error
	for _, d := range a.Dirs() {
		if err := cgroupfs.Remove(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("agent %w", err))
		}
	}
	return errors.Join(errs...)
}

// orphanAgentCgroup is the agent cgroup a run would have had, from its run
// id alone: for a crashed run whose spec cannot be read.
func orphanAgentCgroup(runID string) (AgentCgroup, error) {
	parents, mode, err := agentParents(isolate.DefaultCgroupParent, false)
	if err != nil {
		return AgentCgroup{}, err
	}
	return AgentCgroup{RunID: runID, Mode: mode, FreezerDir: filepath.Join(parents[0], runID),
		CpusetDir: filepath.Join(parents[len(parents)-1], runID)}, nil
}

// AgentFrozen reports whether the kernel reports the agent of run runID
// frozen, read as Freeze reads it, for a process that watches a run from
// outside (the fault suite waits for a metered query's freeze).
func AgentFrozen(runID string) (bool, error) {
	a, err := orphanAgentCgroup(runID)
	if err != nil {
		return false, err
	}
	return a.Freezer().is(true)
}

// Freezer returns the freezer of the agent's cgroup (broker.Freezer).
func (a AgentCgroup) Freezer() *AgentFreezer {
	return &AgentFreezer{dir: a.FreezerDir, v2: a.v2()}
}

// AgentFreezer stops and resumes every process of the agent's cgroup, and
// returns only once the kernel reports the new state.
type AgentFreezer struct {
	dir string
	v2  bool
}

// Check proves that the freezer's control file is there.
func (f *AgentFreezer) Check() error {
	file := "freezer.state"
	if f.v2 {
		file = "cgroup.freeze"
	}
	if _, err := os.Stat(filepath.Join(f.dir, file)); err != nil {
		return fmt.Errorf("agent freezer: %w", err)
	}
	return nil
}

// Freeze freezes the agent and waits until the kernel reports it frozen
// (v1 freezer.state FROZEN, v2 cgroup.events "frozen 1"), or ctx ends.
func (f *AgentFreezer) Freeze(ctx context.Context) error { return f.set(ctx, true) }

// Thaw thaws the agent and waits until the kernel reports it thawed.
func (f *AgentFreezer) Thaw(ctx context.Context) error { return f.set(ctx, false) }

func (f *AgentFreezer) set(ctx context.Context, frozen bool) error {
	verb := map[bool]string{true: "freeze", false: "thaw"}[frozen]
	if err := writeCgroup(f.dir, f.controlFile(), f.controlValue(frozen)); err != nil {
		return fmt.Errorf("agent %s: %w", verb, err)
	}
	delay := 10 * time.Microsecond
	for polls := 1; ; polls++ {
		ok, err := f.is(frozen)
		if err != nil {
			return fmt.Errorf("agent %s: %w", verb, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent %s: the kernel did not report it done: %w%s", verb, ctx.Err(), f.unfrozen(frozen))
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Millisecond)
		if frozen && !f.v2 {
			if err := f.refreeze(polls); err != nil {
				return fmt.Errorf("agent %s: %w", verb, err)
			}
		}
	}
}

// refreeze repeats a v1 freeze that is still FREEZING. The v1 freezer
// signals the group's tasks only when FROZEN is written, so a task that
// missed that pass (one forked while the state changed) can leave the
// group FREEZING for good; writing FROZEN again signals it, and now and
// then a short thaw lets a task stuck between the two states move on, as
// the reference runtime's v1 freezer does. No sandbox runs before the
// freeze is reported, so the agent running a little longer is harmless.
func (f *AgentFreezer) refreeze(polls int) error {
	if polls%50 == 0 {
		if err := writeCgroup(f.dir, "freezer.state", "THAWED"); err != nil {
			return err
		}
	}
	return writeCgroup(f.dir, "freezer.state", "FROZEN")
}

// unfrozen names, for the operator's audit record of a freeze or thaw that
// did not finish, the group's tasks that are not yet in the wanted state,
// with each one's scheduler state and what it waits in: the reason is
// nearly always one task in an uninterruptible sleep. It reads only the
// host's /proc; nothing of it reaches the agent.
func (f *AgentFreezer) unfrozen(frozen bool) string {
	pids := fieldsOf(filepath.Join(f.dir, "cgroup.procs"))
	if !f.v2 {
		pids = fieldsOf(filepath.Join(f.dir, "tasks"))
	}
	var out []string
	for _, pid := range pids {
		wchan, _ := os.ReadFile(filepath.Join("/proc", pid, "wchan"))
		// The state follows the command's closing parenthesis.
		state := "?"
		if b, err := os.ReadFile(filepath.Join("/proc", pid, "stat")); err == nil {
			if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
				if f := strings.Fields(string(b[i+1:])); len(f) > 0 {
					state = f[0]
				}
			}
		}
		w := string(wchan)
		if frozen == strings.Contains(w, "refrigerator") {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		out = append(out, fmt.Sprintf("%s(%s) %s %s", pid, strings.TrimSpace(string(comm)), state, w))
		if len(out) == 8 {
			out = append(out, "…")
			break
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (not yet " + map[bool]string{true: "frozen", false: "thawed"}[frozen] + ": " + strings.Join(out, ", ") + ")"
}

func (f *AgentFreezer) controlFile() string {
	if f.v2 {
		return "cgroup.freeze"
	}
	return "freezer.state"
}

func (f *AgentFreezer) controlValue(frozen bool) string {
	switch {
	case f.v2 && frozen:
		return "1"
	case f.v2:
		return "0"
	case frozen:
		return "FROZEN"
	}
	return "THAWED"
}

// is reports whether the kernel reports the cgroup in the wanted state: the
// value written to ask for it (controlValue), read back from cgroup.events'
// "frozen" line (v2) or from freezer.state (v1, which says FREEZING until
// every task has stopped).
func (f *AgentFreezer) is(frozen bool) (bool, error) {
	want := f.controlValue(frozen)
	if f.v2 {
		b, err := os.ReadFile(filepath.Join(f.dir, "cgroup.events"))
		if err != nil {
			return false, err
		}
		return slices.Contains(strings.Split(string(b), "\n"), "frozen "+want), nil
	}
	b, err := os.ReadFile(filepath.Join(f.dir, f.controlFile()))
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == want, nil
}

// PinProcess confines every thread of this process to cpus ("" = leave
// as is). Threads created later inherit the mask of their creator, so once
// every existing thread is pinned the process stays pinned; the loop
// repeats until a pass finds no thread it has not pinned.
func PinProcess(cpus string) error {
	if cpus == "" {
		return nil
	}
	list, err := ParseCPUs(cpus)
	if err != nil {
		return err
	}
	var set unix.CPUSet
	for _, c := range list {
		set.Set(c)
	}
	done := map[int]bool{}
	for range 100 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("pin: %w", err)
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pin thread %d to CPUs %s: %w", tid, cpus, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
	return errors.New("pin: threads keep appearing")
}

// ThawIfBrokerDies thaws the agent once the broker process has ended: a
// broker killed in the middle of a metered query would otherwise leave the
// agent frozen for good (and on cgroup v1 a frozen process cannot even be
// killed). After a normal stop the thaw finds nothing to do.
func ThawIfBrokerDies(b *BrokerProc, a AgentCgroup) {
	if b == nil || a.FreezerDir == "" {
		return
	}
	go func() {
		<-b.Exited()
		ctx, cancel := context.WithTimeout(context.Background(), broker.DefaultThawTimeout)
		defer cancel()
		_ = a.Freezer().Thaw(ctx) // the cgroup may be gone already
	}()
}
