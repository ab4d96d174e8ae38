package faults

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/tests/fixture"
)

// Phases of a run at which a process is killed.
const (
	phaseStaging  = "staging"
	phaseReady    = "broker-ready"
	phaseMidQuery = "mid-query"
	phaseTeardown = "teardown"
)

// scriptFor is the agent script for a phase: it prints "started", then
// sleeps (broker ready), runs a query that takes 20 s (mid-query), or ends
// at once (teardown).
func scriptFor(phase string) string {
	switch phase {
	case phaseMidQuery:
		return "echo started\n" + queryLine(20) + "echo after\n"
	case phaseTeardown:
		return "echo started\necho bye\n"
	}
	return "echo started\nexec sleep 120\n"
}

// reach waits until run r of runID, whose repository is metered, is at
// phase.
func reach(t *testing.T, r *run, runID, phase string) {
	t.Helper()
	reachOn(t, nil, r, runID, phase, true)
}

// reachOn is reach for a run on e (nil: not docker) whose repository is
// metered or not. Mid-query is when the query's sandbox runs: for a
// metered repository the kernel reports the agent frozen first (the query
// was debited; until then it may wait behind the warm pool's first fill,
// whose sandbox, or on docker whose trial container, already runs, and a
// kill then would meet an agent free to see the broker die); on docker a
// container of the run then runs on the Engine (its processes are in the
// Engine's cgroups, not the run's).
func reachOn(t *testing.T, e *engine, r *run, runID, phase string, metered bool) {
	t.Helper()
	switch phase {
	case phaseStaging:
		r.waitStderr(t, "awf: staging")
	case phaseReady:
		r.waitStdout(t, "started")
	case phaseMidQuery:
		r.waitStdout(t, "started")
		if metered {
			require.Eventually(t, func() bool { ok, _ := host.AgentFrozen(runID); return ok }, time.Minute, 5*time.Millisecond,
				"the agent of run %s was never frozen for its query", runID)
		}
		if e == nil {
			waitSandbox(t, runID)
			return
		}
		require.Eventually(t, func() bool {
			for _, c := range containers(t, e.sock, runID) {
				if strings.HasSuffix(c, " running") {
					return true
				}
			}
			return false
		}, time.Minute, 10*time.Millisecond, "no running container of run %s", runID)
	case phaseTeardown:
		r.waitStdout(t, "bye")
	}
}

// killRuntimes are the runtimes of a kill case: allRuntimes. For docker
// the test function's private Engine, started once and shared by its
// subtests (each Engine start costs seconds), is engineOf's.
type killRuntimes struct {
	rts    []string
	parent *testing.T
	e      *engine
}

func newKillRuntimes(t *testing.T) *killRuntimes {
	return &killRuntimes{rts: allRuntimes(t), parent: t}
}

// engineOf is the private Engine for rt docker (started on first use by
// subtest t, stopped when the test function ends), nil for any other
// runtime.
func (k *killRuntimes) engineOf(t *testing.T, rt string) *engine {
	t.Helper()
	if rt != "docker" {
		return nil
	}
	if k.e == nil {
		// allRuntimes found dockerd: newEngine does not skip, it only
		// registers the Engine's stop with the test function.
		e := newEngine(k.parent)
		e.script(t, "start")
		k.e = e
	}
	return k.e
}

// killRun is an awf run of a kill case: its run, the private Engine it
// runs on (nil: not docker) and its run id.
type killRun struct {
	*run
	e  *engine
	id string
}

// start starts an awf run on rt whose agent script is scriptFor(phase)
// and returns it once it has reached phase.
func (k *killRuntimes) start(t *testing.T, rt, phase string) killRun {
	t.Helper()
	e := k.engineOf(t, rt)
	r := startRun(t, killConfig(t, rt, e, 0), agentScript(t, scriptFor(phase)))
	kr := killRun{run: r, e: e, id: r.runID(t)}
	reachOn(t, e, r, kr.id, phase, true)
	return kr
}

// each runs f in a subtest per runtime, on an awf run started at phase.
func (k *killRuntimes) each(t *testing.T, phase string, f func(*testing.T, killRun)) {
	for _, rt := range k.rts {
		t.Run(rt, func(t *testing.T) { f(t, k.start(t, rt, phase)) })
	}
}

// kill9 sends SIGKILL to pid and returns when it did.
func kill9(t *testing.T, pid int) time.Time {
	t.Helper()
	killed := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	return killed
}

// assertGone fails unless, within leftoverBound of since, nothing of run
// runID is left on the host (assertNothingLeft) nor on e
// (assertNoContainers).
func assertGone(t *testing.T, e *engine, runID string, since time.Time) {
	t.Helper()
	assertNothingLeft(t, runID, since)
	assertNoContainers(t, e, runID, since)
}

// killConfig writes an awf config for runtime rt, on e's Engine for
// docker (nil: no dockerSocket, the default Engine, as writeConfig).
func killConfig(t *testing.T, rt string, e *engine, maxInvocations int) string {
	t.Helper()
	b := map[string]any{
		"enabled":      true,
		"runtime":      rt,
		"timeout":      30,
		"privateRepos": []map[string]any{{"repo": "demo/app", "sensitivity": "internal", "source": repoDir}},
		"rootfs":       map[string]any{"path": rootfsDir, "digest": rootfsHash},
	}
	if maxInvocations > 0 {
		b["maxInvocations"] = maxInvocations
	}
	if e != nil {
		b["dockerSocket"] = e.sock
	}
	return fixture.WriteConfig(t, t.TempDir(), b, agentUser)
}

// assertNoContainers fails unless, within leftoverBound of since, no
// container labelled with run runID is left on e (nil: nothing to check).
func assertNoContainers(t *testing.T, e *engine, runID string, since time.Time) {
	t.Helper()
	if e == nil {
		return
	}
	if left := stillLeft(since, func() []string { return containers(t, e.sock, runID) }); len(left) > 0 {
		t.Errorf("containers of run %s left on the Engine %v after the fault:\n  %s", runID, leftoverBound, strings.Join(left, "\n  "))
	}
}

// logWatchdog logs what the watchdog of run r said (its reclaim and how
// long it took), or that it said nothing.
func logWatchdog(t *testing.T, r *run) {
	t.Helper()
	var said []string
	for _, l := range strings.Split(r.stderr.String(), "\n") {
		if strings.Contains(l, "awf: watchdog:") {
			said = append(said, l)
		}
	}
	if len(said) == 0 {
		t.Log("the watchdog said nothing (released, or no reclaim)")
		return
	}
	t.Log(strings.Join(said, "\n"))
}

// TestKillAwfRun: kill -9 of awf run at each phase leaves nothing of the
// run after 2 s (the watchdog reclaims it), the agent saw canonical bytes
// only, and the audit was archived with what the broker recorded.
func TestKillAwfRun(t *testing.T) {
	k := newKillRuntimes(t)
	for _, rt := range k.rts {
		for _, phase := range []string{phaseStaging, phaseReady, phaseMidQuery, phaseTeardown} {
			t.Run(rt+"/"+phase, func(t *testing.T) {
				r := k.start(t, rt, phase)
				assertGone(t, r.e, r.id, kill9(t, r.cmd.Process.Pid))
				r.wait(t, 10*time.Second)
				logWatchdog(t, r.run)
				assertCanonical(t, r.stdout.String(), "started", "bye")
				assert.NotContains(t, r.stdout.String(), "Q ", "the killed run answered a query")
				if phase == phaseTeardown {
					// Killed during (or just after) its own teardown: the
					// audit may already be archived, or not.
					return
				}
				assert.Contains(t, r.stderr.String(), "reclaimed", "the watchdog did not report its reclaim")
				ev := events(audit(t, r.id))
				assert.NotContains(t, ev, "shutdown-cleanup-failed")
				if phase == phaseStaging {
					assert.NotContains(t, ev, "listening")
				} else {
					assert.Contains(t, ev, "listening")
				}
			})
		}
	}
}

// TestKillBroker: kill -9 of the broker mid-query kills the query's
// sandbox within 2 s (awf run, the survivor, kills the run's sandbox
// cgroups); the agent sees the canonical error, goes on, and its end tears
// everything down.
func TestKillBroker(t *testing.T) {
	newKillRuntimes(t).each(t, phaseMidQuery, func(t *testing.T, r killRun) {
		killed := kill9(t, findProc(t, r.id, regexp.MustCompile(`awf broker --serve `)))
		assertNoSandbox(t, r.id, killed)
		assertNoContainers(t, r.e, r.id, killed)
		r.wait(t, time.Minute)
		assertGone(t, r.e, r.id, time.Now())
		out := r.stdout.String()
		assertCanonical(t, out, "started", "after")
		assert.Contains(t, out, "Q "+errorEnv+"\n")
		assert.Contains(t, out, "after\n")
		assert.Contains(t, events(audit(t, r.id)), "listening")
	})
}

// TestKillAgentShim: kill -9 of the agent shim (pid 1 of the agent's pid
// namespace) ends every agent process; awf run tears down at once.
func TestKillAgentShim(t *testing.T) {
	newKillRuntimes(t).each(t, phaseReady, func(t *testing.T, r killRun) {
		assertGone(t, r.e, r.id, kill9(t, findProc(t, r.id, regexp.MustCompile(`run --agent-shim `))))
		assert.Equal(t, 128+int(syscall.SIGKILL), r.wait(t, 10*time.Second), r.stderr.String())
		logWatchdog(t, r.run)
		assertCanonical(t, r.stdout.String(), "started")
		ev := events(audit(t, r.id))
		assert.Contains(t, ev, "shutdown")
		assert.NotContains(t, ev, "shutdown-cleanup-failed")
	})
}

// TestKillRunsc: kill -9 of the gVisor sandbox mid-query: the agent gets
// the canonical error, the run goes on and tears down completely.
func TestKillRunsc(t *testing.T) {
	rts := runtimes(t)
	if len(rts) < 2 {
		t.Skip("BLOCKED: runsc is not installed on this host")
	}
	r := startRun(t, writeConfig(t, "gvisor", 0), agentScript(t, scriptFor(phaseMidQuery)))
	id := r.runID(t)
	reach(t, r, id, phaseMidQuery)
	// Every runsc process of the run: the runsc command, its sandbox and
	// its gofer.
	findProc(t, id, regexp.MustCompile(`^runsc-sandbox `))
	for _, p := range procs() {
		if cl := cmdline(p); strings.Contains(cl, id) && regexp.MustCompile(`^(\S*/)?runsc`).MatchString(cl) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	assert.Equal(t, 0, r.wait(t, 2*time.Minute), r.stderr.String())
	assertNothingLeft(t, id, time.Now())
	out := r.stdout.String()
	assertCanonical(t, out, "started", "after")
	assert.Equal(t, 1, strings.Count(out, "Q "), "the agent gets one answer")
	assert.NotContains(t, events(audit(t, id)), "shutdown-cleanup-failed")
}

// TestCancelMidQuery: SIGTERM to awf run mid-query (a CI job cancelled):
// the running query is killed, awf exits within 5 s with one message line,
// the audit records "cancelled" and no failure, and nothing is left.
func TestCancelMidQuery(t *testing.T) {
	newKillRuntimes(t).each(t, phaseMidQuery, func(t *testing.T, r killRun) {
		sent := time.Now()
		require.NoError(t, syscall.Kill(r.cmd.Process.Pid, syscall.SIGTERM))
		code := r.wait(t, 5*time.Second)
		t.Logf("awf run exited %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
		assertGone(t, r.e, r.id, time.Now())
		assert.Equal(t, 1, strings.Count(r.stderr.String(), "awf: interrupted"), r.stderr.String())
		assert.NotEqual(t, 0, code)
		assertCanonical(t, r.stdout.String(), "started", "after")
		ev := events(audit(t, r.id))
		assert.Contains(t, ev, "cancelled")
		assert.NotContains(t, ev, "shutdown-cleanup-failed")
	})
}

// assertNoSandbox fails unless, within leftoverBound of since, no process
// of the run's sandbox cgroups (awf-<run>-…) is left.
func assertNoSandbox(t *testing.T, runID string, since time.Time) {
	t.Helper()
	if left := stillLeft(since, func() []string { return sandboxProcs(runID) }); len(left) > 0 {
		t.Errorf("sandbox processes of run %s left %v after the broker died:\n  %s", runID, leftoverBound, strings.Join(left, "\n  "))
	}
}

// TestStartupSweepWithoutWatchdog: kill -9 of awf run and of its watchdog
// mid-query (the host lost power, say): the next awf run's start-up sweep
// reclaims everything the first left — its processes (a frozen agent
// included), its sandbox's mounts and cgroups in every hierarchy, its
// private root and ingress directory — whatever the runtime of either.
func TestStartupSweepWithoutWatchdog(t *testing.T) {
	newKillRuntimes(t).each(t, phaseMidQuery, func(t *testing.T, r killRun) {
		kill9(t, findProc(t, r.id, regexp.MustCompile(`run --watchdog `)))
		kill9(t, r.cmd.Process.Pid)
		// Not r.wait: the frozen agent still holds awf's output pipes
		// until the sweep below kills it.
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
			i := strings.LastIndexByte(string(b), ')')
			return i < 0 || strings.HasPrefix(string(b[i+1:]), " Z")
		}, 10*time.Second, 10*time.Millisecond)
		t.Cleanup(func() { audit(t, r.id) })
		next := startRun(t, writeConfig(t, "direct", 0), agentScript(t, "echo started\n"))
		assert.Equal(t, 0, next.wait(t, 2*time.Minute), next.stderr.String())
		assert.Contains(t, next.stderr.String(), "reclaimed 1 run")
		assertGone(t, r.e, r.id, time.Now())
		assertNothingLeft(t, next.runIDAfter(t), time.Now())
	})
}
