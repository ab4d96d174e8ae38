package host

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
)

func TestSplitCPUList(t *testing.T) {
	seq := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	cases := []struct {
		cpus []int
		want CPUSplit
	}{
		{nil, CPUSplit{}},
		{[]int{3}, CPUSplit{}},
		{[]int{0, 1}, CPUSplit{Agent: "0", Sandbox: "1"}},
		{seq(3), CPUSplit{Agent: "0-1", Sandbox: "2"}},
		{seq(4), CPUSplit{Agent: "0-2", Sandbox: "3"}},
		{seq(8), CPUSplit{Agent: "0-5", Sandbox: "6-7"}},
		{seq(64), CPUSplit{Agent: "0-47", Sandbox: "48-63"}},
		{[]int{0, 2, 4, 6, 7}, CPUSplit{Agent: "0,2,4", Sandbox: "6-7"}},
	}
	for _, tc := range cases {
		got := splitCPUList(tc.cpus)
		assert.Equal(t, tc.want, got, "%v", tc.cpus)
		if got.Sandbox == "" {
			continue
		}
		a, err := ParseCPUs(got.Agent)
		require.NoError(t, err)
		s, err := ParseCPUs(got.Sandbox)
		require.NoError(t, err)
		assert.Equal(t, tc.cpus, append(a, s...), "the split covers every CPU once")
	}
	for _, bad := range []string{"x", "1-", "3-1", "-1", "1,,2", "8192", "0-8192", "+1", "1-+2"} {
		_, err := ParseCPUs(bad)
		assert.Error(t, err, bad)
	}
	got, err := ParseCPUs(" 0-2,5,1\n")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2, 5}, got)
}

// testAgentCgroup plans and creates an agent cgroup for a fresh run id, and
// removes it (with anything left in it) at the end of the test.
func testAgentCgroup(t testing.TB) AgentCgroup {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "agent cgroup tests must run as root")
	a, err := PlanAgentCgroup(NewRunID(), isolate.DefaultCgroupParent)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, CreateAgentCgroup(ctx, a))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, RemoveAgentCgroup(ctx, a))
		for _, d := range a.Dirs() {
			assert.NoDirExists(t, d)
		}
	})
	return a
}

// counterScript increments a 64-bit counter in a shared file as fast as it
// can.
const counterScript = `import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 8)
i = 0
while True:
    i += 1
    m[0:8] = i.to_bytes(8, "little")
`

// startInCgroup starts the counter and moves it into the agent cgroup, as
// the shim moves itself.
func startInCgroup(t testing.TB, a AgentCgroup) (*exec.Cmd, func() uint64) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "counter")
	require.NoError(t, os.WriteFile(f, make([]byte, 8), 0o600))
	cmd := exec.Command("python3", "-c", counterScript, f)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start(), "python3 is needed for the counter")
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = a.Freezer().Thaw(context.Background()) // a frozen v1 task cannot die
		_, _ = cmd.Process.Wait()
	})
	for _, d := range a.Dirs() {
		require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
	}
	read := func() uint64 {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		return binary.LittleEndian.Uint64(b)
	}
	require.Eventually(t, func() bool { return read() > 0 }, 10*time.Second, 10*time.Millisecond, "the counter never started")
	return cmd, read
}

// TestAgentCgroupFreezeStopsTheAgent freezes a process in the agent cgroup:
// its counter stands still while frozen and moves again after the thaw.
func TestAgentCgroupFreezeStopsTheAgent(t *testing.T) {
	a := testAgentCgroup(t)
	for _, d := range a.Dirs() {
		fi, err := os.Stat(filepath.Dir(d))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "parent %s", filepath.Dir(d))
	}
	_, read := startInCgroup(t, a)
	f := a.Freezer()
	require.NoError(t, f.Check())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for round := range 3 {
		require.NoError(t, f.Freeze(ctx))
		v := read()
		time.Sleep(200 * time.Millisecond)
		assert.Equal(t, v, read(), "round %d: the counter moved while frozen", round)
		require.NoError(t, f.Thaw(ctx))
		require.Eventually(t, func() bool { return read() > v }, 10*time.Second, 5*time.Millisecond, "round %d: the counter did not resume", round)
	}
	// Freezing twice and thawing twice are harmless.
	require.NoError(t, f.Freeze(ctx))
	require.NoError(t, f.Freeze(ctx))
	require.NoError(t, f.Thaw(ctx))
	require.NoError(t, f.Thaw(ctx))
}

// TestAgentCgroupFreezeDeadline fails a freeze whose context has ended, and
// the thaw still works afterwards.
func TestAgentCgroupFreezeDeadline(t *testing.T) {
	a := testAgentCgroup(t)
	_, read := startInCgroup(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := a.Freezer()
	// A cancelled context may still see the cgroup frozen at the first look;
	// either way the thaw must bring the counter back.
	_ = f.Freeze(ctx)
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer tcancel()
	require.NoError(t, f.Thaw(tctx))
	v := read()
	require.Eventually(t, func() bool { return read() > v }, 10*time.Second, 5*time.Millisecond)

	missing := AgentFreezer{dir: filepath.Join(t.TempDir(), "gone"), v2: a.v2()}
	assert.Error(t, missing.Check())
	assert.Error(t, missing.Freeze(tctx))
}

// TestAgentCgroupFreezeForkStorm freezes, many times over, an agent that
// forks without pause (as a shell running jobs in the background does):
// each freeze finishes within the broker's default deadline, even when a
// child is forked while the state changes, and nothing runs while frozen.
func TestAgentCgroupFreezeForkStorm(t *testing.T) {
	a := testAgentCgroup(t)
	f := filepath.Join(t.TempDir(), "forks")
	cmd := exec.Command("/bin/sh", "-c", `while :; do (echo x >> "$1") & /bin/true; wait; done`, "sh", f)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = a.Freezer().Thaw(context.Background())
		_, _ = cmd.Process.Wait()
	})
	for _, d := range a.Dirs() {
		require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
	}
	size := func() int64 {
		fi, err := os.Stat(f)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	require.Eventually(t, func() bool { return size() > 0 }, 10*time.Second, 5*time.Millisecond, "the fork loop never started")
	fz := a.Freezer()
	for round := range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), broker.DefaultFreezeTimeout)
		err := fz.Freeze(ctx)
		cancel()
		require.NoError(t, err, "round %d", round)
		v := size()
		time.Sleep(20 * time.Millisecond)
		assert.Equal(t, v, size(), "round %d: a child wrote while frozen", round)
		tctx, tcancel := context.WithTimeout(context.Background(), broker.DefaultThawTimeout)
		require.NoError(t, fz.Thaw(tctx), "round %d", round)
		tcancel()
		require.Eventually(t, func() bool { return size() > v }, 10*time.Second, time.Millisecond, "round %d: the loop did not resume", round)
	}
}

// TestAgentFreezerNamesWhatIsNotFrozen: the detail of a freeze that did not
// finish names each task still running, for the operator's audit record.
func TestAgentFreezerNamesWhatIsNotFrozen(t *testing.T) {
	a := testAgentCgroup(t)
	cmd, _ := startInCgroup(t, a)
	fz := a.Freezer()
	got := fz.unfrozen(true)
	assert.Contains(t, got, strconv.Itoa(cmd.Process.Pid)+"(python3) ")
	assert.Contains(t, got, "not yet frozen")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, fz.Freeze(ctx))
	assert.Empty(t, fz.unfrozen(true), "every task is frozen")
	assert.Contains(t, fz.unfrozen(false), "not yet thawed")
	require.NoError(t, fz.Thaw(ctx))
}

// TestAgentCPUsDisjointFromSandboxes checks that a process in the agent
// cgroup may run only on the agent's CPUs, which the sandboxes' set does
// not touch.
func TestAgentCPUsDisjointFromSandboxes(t *testing.T) {
	require.GreaterOrEqual(t, runtime.NumCPU(), 2, "CPU separation needs a host with two or more CPUs")
	a := testAgentCgroup(t)
	require.NotEmpty(t, a.CPUs.Agent)
	require.NotEmpty(t, a.CPUs.Sandbox)
	cmd, _ := startInCgroup(t, a)
	got := cpusAllowed(t, cmd.Process.Pid)
	agent, err := ParseCPUs(a.CPUs.Agent)
	require.NoError(t, err)
	sandbox, err := ParseCPUs(a.CPUs.Sandbox)
	require.NoError(t, err)
	assert.Equal(t, agent, got, "the agent's Cpus_allowed_list")
	for _, c := range got {
		assert.NotContains(t, sandbox, c, "CPU %d is shared with the sandboxes", c)
	}
	// The agent cannot widen its own affinity beyond its cpuset.
	var all unix.CPUSet
	for _, c := range append(slices.Clone(agent), sandbox...) {
		all.Set(c)
	}
	_ = unix.SchedSetaffinity(cmd.Process.Pid, &all)
	assert.Equal(t, agent, cpusAllowed(t, cmd.Process.Pid), "affinity escaped the cpuset")
	t.Logf("split: %s", a.CPUs)
}

// TestPinProcessPinsEveryThread pins a child test process and checks every
// thread's mask.
func TestPinProcessPinsEveryThread(t *testing.T) {
	if os.Getenv("AWF_TEST_PIN") != "" {
		if err := PinProcess(os.Getenv("AWF_TEST_PIN")); err != nil {
			os.Exit(3)
		}
		// More threads after the pin inherit it.
		done := make(chan struct{})
		for range 8 {
			go func() { runtime.LockOSThread(); <-done }()
		}
		time.Sleep(100 * time.Millisecond)
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			var set unix.CPUSet
			if unix.SchedGetaffinity(tid, &set) != nil || set.Count() != 1 || !set.IsSet(lastCPU()) {
				os.Exit(4)
			}
		}
		os.Exit(0)
	}
	require.GreaterOrEqual(t, runtime.NumCPU(), 2, "pinning needs a host with two or more CPUs")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPinProcessPinsEveryThread$")
	cmd.Env = append(os.Environ(), "AWF_TEST_PIN="+strconv.Itoa(lastCPU()))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Error(t, PinProcess("nonsense"))
}

// lastCPU is the highest CPU this process may run on.
func lastCPU() int {
	var set unix.CPUSet
	_ = unix.SchedGetaffinity(0, &set)
	last := -1
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			last = i
		}
	}
	return last
}

// cpusAllowed reads a process's Cpus_allowed_list.
func cpusAllowed(t testing.TB, pid int) []int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			cpus, err := ParseCPUs(v)
			require.NoError(t, err)
			return cpus
		}
	}
	t.Fatal("no Cpus_allowed_list")
	return nil
}

// TestSweepOrphansRemovesAgentCgroups: the orphan sweep thaws and removes
// the agent cgroup of a crashed run under its private base (named by the
// spec, or by the run id when the spec is unreadable), keeps a live run's,
// and never touches an agent cgroup whose run is not under its base.
func TestSweepOrphansRemovesAgentCgroups(t *testing.T) {
	priv, ingress, archive := t.TempDir(), t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := time.Now().Add(-2 * orphanMinAge)

	crashed := testAgentCgroup(t) // a spec names it; its process is frozen
	_, _ = startInCgroup(t, crashed)
	require.NoError(t, crashed.Freezer().Freeze(ctx))
	l := NewLayout(crashed.RunID, priv, ingress, archive)
	require.NoError(t, os.MkdirAll(l.PrivateRoot, 0o700))
	require.NoError(t, WriteSpec(Spec{Layout: l, AgentCgroup: crashed}))
	lock, err := lockRun(l.LockPath)
	require.NoError(t, err)
	lock.Close() // the run died: its lock is free

	nospec := testAgentCgroup(t) // crashed before its spec could be read
	require.NoError(t, os.MkdirAll(filepath.Join(priv, nospec.RunID), 0o700))
	require.NoError(t, os.Chtimes(filepath.Join(priv, nospec.RunID), old, old))

	live := testAgentCgroup(t)
	ll := NewLayout(live.RunID, priv, ingress, archive)
	require.NoError(t, os.MkdirAll(ll.PrivateRoot, 0o700))
	lock, err = lockRun(ll.LockPath)
	require.NoError(t, err)
	defer lock.Close()

	elsewhere := testAgentCgroup(t) // a run under another private base

	n, err := SweepOrphans(ctx, priv, ingress, archive)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	for _, a := range []AgentCgroup{crashed, nospec} {
		for _, d := range a.Dirs() {
			assert.NoDirExists(t, d, "a crashed run's agent cgroup is left")
		}
	}
	for _, a := range []AgentCgroup{live, elsewhere} {
		for _, d := range a.Dirs() {
			assert.DirExists(t, d, "an agent cgroup of a run the sweep does not own was removed")
		}
	}
}

// TestAgentCgroupModeIsTheRuntimes checks that the agent cgroup follows the
// one cgroup-mode detector the direct runtime uses.
func TestAgentCgroupModeIsTheRuntimes(t *testing.T) {
	mode, err := cgroupfs.Mode()
	require.NoError(t, err)
	a, err := PlanAgentCgroup(NewRunID(), isolate.DefaultCgroupParent)
	require.NoError(t, err)
	assert.Equal(t, mode, a.Mode)
	if cgroupfs.IsV1(mode) {
		assert.Len(t, a.Dirs(), 2)
		assert.Contains(t, a.FreezerDir, "/freezer/awf-agent/")
		assert.Contains(t, a.CpusetDir, "/cpuset/awf-agent/")
	} else {
		assert.Len(t, a.Dirs(), 1)
	}
}

// BenchmarkAgentFreezeThaw measures one freeze and one thaw of an agent
// cgroup holding a busy process, each until the kernel reports it done;
// run it with -benchtime=100x for the medians over 100.
func BenchmarkAgentFreezeThaw(b *testing.B) {
	a := testAgentCgroup(b)
	_, _ = startInCgroup(b, a)
	f := a.Freezer()
	ctx := context.Background()
	var fr, th []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := f.Freeze(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := f.Thaw(ctx); err != nil {
			b.Fatal(err)
		}
		fr, th = append(fr, t1.Sub(t0)), append(th, time.Since(t1))
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(med(fr), "freeze-median-µs")
	b.ReportMetric(med(th), "thaw-median-µs")
	b.ReportMetric(float64(fr[len(fr)-1].Microseconds()), "freeze-max-µs")
}

// FuzzParseCPUs holds the CPU-list reader to its contract on any text: it
// never panics, and a list it accepts is sorted, free of duplicates, within
// maxCPUs, and read back the same from its own rendering.
func FuzzParseCPUs(f *testing.F) {
	for _, s := range []string{"0", "0-3", " 0-2,5,1\n", "0,2,4,6-7", "8191", "0-8191", "3-1", "1,,2", "+1", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		cpus, err := ParseCPUs(list)
		if err != nil {
			return
		}
		for i, c := range cpus {
			if c < 0 || c >= maxCPUs || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("ParseCPUs(%q) = %v: not sorted, unique and below %d", list, cpus, maxCPUs)
			}
		}
		again, err := ParseCPUs(formatCPUs(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("ParseCPUs(%q) = %v, rendered %q, read back %v, %v", list, cpus, formatCPUs(cpus), again, err)
		}
	})
}
