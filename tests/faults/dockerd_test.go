package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
)

// engine is a private Docker Engine of this test alone (tests/setup/
// dockerd.sh with its own run directory, data root and cgroup parent, all
// named by its tag), so that killing it touches no other test's Engine.
type engine struct {
	vars           []string // the dockerd.sh variables naming this Engine
	env            []string // BaseEnv and vars
	sock, run, tag string
}

// engineSeq numbers the Engines of this test process: each gets names of
// its own, so that what one case leaves is never taken for another's.
var engineSeq atomic.Int32

// enginePrefix begins the tag of every Engine of this test process.
func enginePrefix() string { return fmt.Sprintf("awf-faults-docker-%d-", os.Getpid()) }

// engineHomes are the directories below which this test process's Engines
// keep their run directories and data roots: base/awf-faults-<pid>/e, for
// base /run and /var/lib. The middle directory is root's alone (0700), so
// that an Engine's start and stop changes nothing another user can stat:
// the channel suite's agent, run concurrently by go test, watches the
// timestamps and listings of /run and /var/lib for what awf changes, and
// an Engine directory made and removed there in both of its requests'
// windows is indistinguishable from a lifecycle channel.
func engineHomes() []string {
	var homes []string
	for _, base := range []string{"/run", "/var/lib"} {
		homes = append(homes, filepath.Join(base, fmt.Sprintf("awf-faults-%d", os.Getpid()), "e"))
	}
	return homes
}

// makeEngineHomes makes engineHomes, their parents mode 0700.
func makeEngineHomes() error {
	for _, h := range engineHomes() {
		if err := os.MkdirAll(filepath.Dir(h), 0o700); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Dir(h), 0o700); err != nil {
			return err
		}
		if err := os.MkdirAll(h, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// removeEngineHomes removes engineHomes and their parents once every
// Engine is stopped and checked (checkPackageLeft names what one left).
func removeEngineHomes() error {
	var errs []error
	for _, h := range engineHomes() {
		if err := os.RemoveAll(filepath.Dir(h)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// newEngine makes a private Engine (not started) whose stop, at the end of
// t, reaps everything of it: its daemons, the shims its containerd started
// (they detach from it by design and outlive it), its containers'
// processes, mounts and cgroups, and its directories. It fails t, naming
// them, if dockerd.sh stop left any of them.
func newEngine(t *testing.T) *engine {
	t.Helper()
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("BLOCKED: dockerd is not installed on this host; the dockerd kill cases cannot run")
	}
	tag := fmt.Sprintf("%s%d", enginePrefix(), engineSeq.Add(1))
	homes := engineHomes()
	e := &engine{run: filepath.Join(homes[0], tag), tag: tag}
	e.sock = filepath.Join(e.run, "docker.sock")
	e.vars = []string{"AWF_DOCKERD_RUN_DIR=" + e.run, "AWF_DOCKERD_DATA_ROOT=" + filepath.Join(homes[1], tag), "AWF_DOCKERD_CGROUP_PARENT=" + tag}
	e.env = append(fixture.BaseEnv(), e.vars...)
	// before: what bears the tag before the Engine exists (nothing, as
	// the tag is new); never touched.
	before := hostSet(taggedLeft(name{s: tag}))
	t.Cleanup(func() {
		var procs []hostThing
		for _, x := range taggedLeft(name{s: tag}) {
			if x.kind == "process" && !before[x.String()] {
				procs = append(procs, x)
			}
		}
		// Logged: a shim or container process here that the Engine no
		// longer lists is what a killed Engine leaves, and stop reaps.
		t.Logf("the Engine's processes before its stop (%d):\n  %s", len(procs), joinThings(procs))
		cmd := exec.Command("../setup/dockerd.sh", "stop")
		cmd.Env = e.env
		out, err := cmd.CombinedOutput()
		t.Logf("dockerd.sh stop (%v): %s", err, strings.TrimSpace(string(out)))
		var left []hostThing
		for _, x := range taggedLeft(name{s: tag}) {
			if !before[x.String()] {
				left = append(left, x)
			}
		}
		if len(left) > 0 {
			t.Errorf("dockerd.sh stop left %d things of Engine %s (reaped now):\n  %s", len(left), tag, joinThings(left))
			for _, err := range reap(left) {
				t.Errorf("reap: %v", err)
			}
		}
	})
	return e
}

func (e *engine) script(t *testing.T, verb string) {
	t.Helper()
	cmd := exec.Command("../setup/dockerd.sh", verb)
	cmd.Env = e.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "dockerd.sh %s: %s", verb, out)
}

// pid is the Engine's dockerd process.
func (e *engine) pid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.run, "dockerd.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return pid
}

// kill kills dockerd with SIGKILL and waits until it is gone.
func (e *engine) kill(t *testing.T) {
	t.Helper()
	pid := e.pid(t)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z")
	}, 10*time.Second, 10*time.Millisecond)
}

// TestKillDockerd: kill -9 of the Engine's dockerd at each phase of a
// docker run. The agent sees canonical bytes only (and, killed at staging,
// no agent starts at all); every answer is in the audit log; the run does
// not report success; within 2 s no awf process, mount, cgroup or socket of
// the run is left, only its private root, kept because its containers
// could not be swept; and once the Engine is back, the next awf run's
// start-up sweep reclaims that root and the run's containers.
func TestKillDockerd(t *testing.T) {
	for _, phase := range []string{phaseStaging, phaseReady, phaseMidQuery, phaseTeardown} {
		t.Run(phase, func(t *testing.T) {
			e := newEngine(t)
			e.script(t, "start")
			script := agentScript(t, "")
			g := newGates(script)
			var body string
			switch phase {
			case phaseStaging, phaseReady:
				body = "echo started\n" + g.wait(1) + queryLine(0) + "echo after\n"
			case phaseMidQuery:
				body = "echo started\n" + queryLine(20) + "echo after\n"
			case phaseTeardown:
				body = "echo started\n" + queryLine(0) + "echo bye\n"
			}
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+body), 0o755))
			var id string
			forceReclaim(t, &id)
			r := startRun(t, configOn(t, "docker", e.sock, 8, "public", "", 30), script)
			id = r.runID(t)
			reachOn(t, e, r, id, phase, false)
			release := holdRoot(t, id)
			e.kill(t)
			if phase == phaseStaging || phase == phaseReady {
				_ = os.WriteFile(filepath.Join(g.dir, "gate1"), nil, 0o644)
			}
			code := r.wait(t, 3*time.Minute)
			t.Logf("awf run exited %d; stderr:\n%s", code, r.stderr.String())
			// With its Engine gone the run cannot sweep its containers: it
			// fails (never success) and keeps only its private root, for
			// the next start-up sweep.
			assert.NotEqual(t, 0, code, "a run that could not sweep its runtime reported success")
			assertOnlyRootKept(t, id, time.Now())
			out := r.stdout.String()
			assertCanonical(t, out, "started", "after", "bye")
			resp := queryResponses(out)
			recs := audit(t, id)
			why := reasons(answered(recs))
			t.Logf("agent saw %v; audit recorded %v; events %v", resp, why, events(recs))
			assert.Len(t, why, len(resp), "one audit record per answer")
			switch phase {
			case phaseStaging:
				// Whether the broker or the agent notices first, the run
				// fails closed: the agent either never starts or gets the
				// canonical error.
				for _, x := range resp {
					assert.Equal(t, errorEnv, x)
				}
				assert.NotEqual(t, 0, code)
			case phaseReady, phaseMidQuery:
				assert.Equal(t, []string{errorEnv}, resp)
				assert.NotEqual(t, "invocation", why[0])
			case phaseTeardown:
				assert.Equal(t, []string{okTrue}, resp)
			}
			// With its Engine dead awf cannot stop a container; what still
			// runs of one (under the Engine's cgroup parent) is logged.
			t.Logf("processes under the dead Engine's cgroup parent after the run: %v", engineProcs(e.tag))
			switch phase {
			case phaseStaging:
				assert.Contains(t, events(recs), "startup-failed")
				assert.NotContains(t, events(recs), "listening")
			default:
				assert.Contains(t, events(recs), "listening")
			}
			// The Engine back, the next awf run's start-up sweep reclaims
			// the kept root and the run's containers on that Engine.
			e.script(t, "start")
			release()
			next := startRun(t, configOn(t, "docker", e.sock, 8, "public", "", 30), agentScript(t, "echo started\n"))
			// (Any awf run's sweep may be the one: other runs share the host.)
			assert.Equal(t, 0, next.wait(t, 2*time.Minute), next.stderr.String())
			assertNothingLeft(t, id, time.Now())
			assert.Empty(t, containers(t, e.sock, id), "containers of run %s left on the Engine", id)
			nid := next.runIDAfter(t)
			assertNothingLeft(t, nid, time.Now())
			assert.Empty(t, containers(t, e.sock, nid))
		})
	}
}

// engineProcs lists the processes in a cgroup below the Engine's cgroup
// parent tag: its containers'.
func engineProcs(tag string) []string {
	var out []string
	for _, p := range procs() {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p))
		if strings.Contains(string(b), "/"+tag+"/") {
			out = append(out, fmt.Sprintf("%d %.80s", p, cmdline(p)))
		}
	}
	return out
}

// assertOnlyRootKept is assertNothingLeft, except for the run's private
// root directory, which a run whose sweep failed keeps for the next
// start-up sweep.
func assertOnlyRootKept(t *testing.T, runID string, since time.Time) {
	t.Helper()
	root := "directory " + filepath.Join(privateBase, runID)
	left := stillLeft(since, func() []string {
		var left []string
		for _, x := range leftovers(runID) {
			if x != root {
				left = append(left, x)
			}
		}
		return left
	})
	if len(left) > 0 {
		t.Errorf("%d things of run %s left %v after the fault:\n  %s", len(left), runID, leftoverBound, strings.Join(left, "\n  "))
	}
}
