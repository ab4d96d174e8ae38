package direct_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
)

const okScript = "open('/query/out', 'w').write('{\"ok\": true}')\n"

// TestPrepareAheadThenExecOnce prepares a sandbox before its job, runs it,
// refuses a second job, and destroys it twice.
func TestPrepareAheadThenExecOnce(t *testing.T) {
	e, ctx, sb := prepared(t, "")
	var seccompAtStart string
	o := sb.Exec(ctx, isolate.Job{InvocationID: "a", Script: []byte(okScript), OnStart: func(pid int) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "Seccomp:"); ok {
					seccompAtStart = strings.TrimSpace(v)
				}
			}
		}
	}})
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.Equal(t, `{"ok": true}`, string(o.Output))
	assert.Equal(t, "2", seccompAtStart, "OnStart sees the job under its seccomp filter")
	o = sb.Exec(ctx, isolate.Job{InvocationID: "b", Script: []byte(okScript)})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	require.NoError(t, sb.Destroy(ctx))
	require.NoError(t, sb.Destroy(ctx))
	e.assertIdle(t)
}

// TestPrepareThenDestroyUnused leaves no trace of a sandbox that never ran.
func TestPrepareThenDestroyUnused(t *testing.T) {
	e, ctx, sb := prepared(t, seedRepo(t))
	require.NoError(t, sb.Destroy(ctx))
	e.assertIdle(t)
}

// TestFailsClosed checks templates that must never run.
func TestFailsClosed(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	noPolicy := e.template(t, "")
	noPolicy.Policy = nil
	badLimits := e.template(t, "")
	badLimits.Limits.Pids = 0
	relRoot := e.template(t, "")
	relRoot.RootFS = "rootfs"
	badRepo := e.template(t, "")
	badRepo.Repo = "/nonexistent/repo"
	emptyRoot := e.template(t, "")
	emptyRoot.RootFS = t.TempDir() // no mount points: init fails inside Start
	for name, tpl := range map[string]isolate.Template{"nil policy": noPolicy, "bad limits": badLimits,
		"relative root": relRoot, "missing repo": badRepo, "empty root": emptyRoot} {
		_, err := e.rt.Prepare(ctx, tpl)
		assert.Error(t, err, name)
		o := e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{Script: []byte(okScript)}})
		assert.Equal(t, isolate.KindLaunchFailed, o.Kind, name)
	}
	e.assertIdle(t)
	require.NoError(t, e.rt.Usable())
}

// TestCustomArgv runs a job with its own command line.
func TestCustomArgv(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := e.rt.Run(ctx, isolate.Spec{Template: e.template(t, ""), Job: isolate.Job{
		Argv:   []string{"/usr/bin/python3", "-I", "-S", "-c", "import sys; open('/query/out', 'w').write(sys.argv[1])", "[42]"},
		Script: []byte("unused"),
	}})
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.Equal(t, "[42]", string(o.Output))
	e.assertIdle(t)
}

// TestConcurrentRuns runs sandboxes side by side.
func TestConcurrentRuns(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tpl := e.template(t, seedRepo(t))
	var wg sync.WaitGroup
	outs := make([]isolate.Outcome, 4)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf("import os\nopen('/query/repo/mine', 'w').write('%d')\nopen('/query/out', 'w').write(str(sorted(os.listdir('/query/repo'))).replace(\"'\", '\"') + '%d')\n", i, i)
			outs[i] = e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: fmt.Sprint(i), Script: []byte(script)}})
		}()
	}
	wg.Wait()
	for i, o := range outs {
		require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
		assert.Equal(t, fmt.Sprintf(`["a.txt", "mine", "sub"]%d`, i), string(o.Output))
	}
	e.assertIdle(t)
}

// TestStateDirIsExclusive refuses a second runtime on a live state dir.
func TestStateDirIsExclusive(t *testing.T) {
	e := newEnv(t)
	_, err := direct.Open(isolate.HostConfig{RunID: newRunID(), StateDir: e.state})
	require.Error(t, err)
}

// TestCgroupMode reports a known mode.
func TestCgroupMode(t *testing.T) {
	mode, err := cgroupfs.Mode()
	require.NoError(t, err)
	assert.Contains(t, []string{cgroupfs.ModeHybrid, cgroupfs.ModeV1, cgroupfs.ModeV2, cgroupfs.ModeV2Delegated}, mode)
	e := newEnv(t)
	assert.Equal(t, mode, e.rt.CgroupMode())
	require.NoError(t, e.rt.Probe(context.Background()))
	t.Logf("cgroup mode %s, parent %s", mode, e.rt.CgroupParentPath())
}

// TestPrepareDeadline gives Prepare too little time: whatever it had started
// is torn down and the runtime stays usable.
func TestPrepareDeadline(t *testing.T) {
	e := newEnv(t)
	for _, d := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		sb, err := e.rt.Prepare(ctx, e.template(t, ""))
		cancel()
		if err == nil {
			require.NoError(t, sb.Destroy(context.Background()))
		}
	}
	require.Eventually(t, func() bool {
		ents, err := os.ReadDir(e.state + "/libct")
		return err == nil && len(ents) == 0 && len(leftoverCgroups(t, e.runID)) == 0
	}, 30*time.Second, 20*time.Millisecond)
	e.assertIdle(t)
	require.NoError(t, e.rt.Usable())
}

// TestUnreclaimableMarksUnusable plants a journal entry that cannot be
// reclaimed: the sweep fails and the runtime fails closed from then on.
func TestUnreclaimableMarksUnusable(t *testing.T) {
	state := t.TempDir()
	runID := newRunID()
	rt, err := direct.Open(isolate.HostConfig{RunID: runID, StateDir: state})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	bogus := `{"kind":"sandbox","name":"awf-old-1","run_id":"old","container":"awf-old-1","scratch":"/etc","created":"2026-01-01T00:00:00Z"}`
	require.NoError(t, os.WriteFile(filepath.Join(state, "journal", "awf-old-1.json"), []byte(bogus), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Error(t, rt.Sweep(ctx))
	require.Error(t, rt.Usable())
	o := rt.Run(ctx, isolate.Spec{Template: isolate.Template{RunID: runID, RootFS: testRootFS, Limits: isolate.DefaultLimits(), Policy: isolatetest.Policy(t)},
		Job: isolate.Job{Script: []byte(okScript)}})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	_, err = rt.Prepare(ctx, isolate.Template{RunID: runID, RootFS: testRootFS, Limits: isolate.DefaultLimits(), Policy: isolatetest.Policy(t)})
	require.Error(t, err)
	_, err = os.Stat("/etc/passwd")
	require.NoError(t, err, "the sweep never touches paths outside its state dir")
}

// TestInstancesOfOneRunNameApart: the query, sealed-probe and bounded-agent
// brokers of one run each open a direct runtime (state dirs of their own,
// one cgroup parent). Sandboxes prepared side by side in two instances of
// one run must never share a name, and so a cgroup: each runs its own job
// and the destroy of one leaves the other whole.
func TestInstancesOfOneRunNameApart(t *testing.T) {
	e := newEnv(t)
	other, err := direct.Open(isolate.HostConfig{RunID: e.runID, StateDir: t.TempDir()})
	require.NoError(t, err)
	isolatetest.SweepAtCleanup(t, other, 30*time.Second, func() { require.NoError(t, other.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl := e.template(t, "")
	a, err := e.rt.Prepare(ctx, tpl)
	require.NoError(t, err)
	b, err := other.Prepare(ctx, tpl)
	require.NoError(t, err)
	job := func(s string) isolate.Job {
		return isolate.Job{InvocationID: s, Script: []byte("open('/query/out', 'w').write('" + s + "')\n")}
	}
	ob := b.Exec(ctx, job("b"))
	require.NoError(t, b.Destroy(ctx))
	oa := a.Exec(ctx, job("a"))
	require.NoError(t, a.Destroy(ctx))
	require.Equal(t, isolate.KindOK, ob.Kind, ob.Detail)
	require.Equal(t, isolate.KindOK, oa.Kind, oa.Detail, "the other instance's destroy reached this sandbox")
	assert.Equal(t, "b", string(ob.Output))
	assert.Equal(t, "a", string(oa.Output))
}
