package direct_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/agentloop"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestEnclaveLoopAnswers runs the real loop in a real enclave on direct
// (isolatetest.CheckEnclaveLoop).
func TestEnclaveLoopAnswers(t *testing.T) {
	runID := newRunID()
	rt, err := direct.Open(isolate.HostConfig{RunID: runID, StateDir: filepath.Join(t.TempDir(), "state")})
	require.NoError(t, err)
	defer func() { assert.NoError(t, rt.Close()) }()
	isolatetest.CheckEnclaveLoop(t, runID, rt.RunEnclave)
}

// preparedRunner is RunEnclave through PrepareEnclave: the enclave is
// prepared without the invocation's files, which Run then writes.
func preparedRunner(rt *direct.Runtime) isolatetest.EnclaveRunner {
	return func(ctx context.Context, t isolate.Template, l enclave.Layout, job isolate.Job) (isolate.Outcome, []byte) {
		files := l.Files
		l.Files = nil
		p, err := rt.PrepareEnclave(ctx, t, l, job.Argv)
		if err != nil {
			return isolate.Err(isolate.KindLaunchFailed, "%v", err), nil
		}
		return p.Run(ctx, files, job)
	}
}

// TestPreparedEnclaveAnswers runs the real loop in an enclave prepared
// before its files were known (isolatetest.CheckEnclaveLoop): the task,
// schema and configuration written by Run are what the loop reads.
func TestPreparedEnclaveAnswers(t *testing.T) {
	runID := newRunID()
	rt, err := direct.Open(isolate.HostConfig{RunID: runID, StateDir: filepath.Join(t.TempDir(), "state")})
	require.NoError(t, err)
	defer func() { assert.NoError(t, rt.Close()) }()
	isolatetest.CheckEnclaveLoop(t, runID, preparedRunner(rt))
}

// loopEnclave returns the template, layout and argv of the loop in an
// enclave network name of e's run (closed at cleanup), over a fresh
// isolatetest.EnclaveFixture.
func loopEnclave(ctx context.Context, t *testing.T, e *testEnv, name string) (isolate.Template, enclave.Layout, []string) {
	t.Helper()
	f := isolatetest.NewEnclaveFixture(ctx, t)
	n := isolatetest.NewEnclave(ctx, t, e.runID, name)
	tpl := isolate.Template{RunID: e.runID, RootFS: f.Root, Limits: isolate.DefaultLimits(), Network: n.Network(), Policy: f.Policy}
	l := enclave.Layout{
		Dir: "/enclave", Binds: []enclave.Bind{{Source: f.Seed, Path: "/enclave/repo"}, {Source: f.Loop, Path: "/enclave/bin/loop", Exec: true}},
		Out: "/enclave/out", OutBytes: 1 << 20, Result: "result.json", Transcript: "transcript.jsonl", TranscriptBytes: 1 << 20,
	}
	return tpl, l, []string{"/enclave/bin/loop"}
}

// TestPreparedEnclaveSingleUse: a prepared enclave runs one job at most,
// only with the argv it was prepared for, and leaves nothing behind
// whether it ran, failed to start or was destroyed unused.
func TestPreparedEnclaveSingleUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newEnv(t)
	tpl, l, argv := loopEnclave(ctx, t, e, "prepared")

	// Destroyed unused: nothing left, and a later Run is refused.
	p, err := e.rt.PrepareEnclave(ctx, tpl, l, argv)
	require.NoError(t, err)
	require.NoError(t, p.Destroy(ctx))
	e.assertIdle(t)
	o, _ := p.Run(ctx, nil, isolate.Job{InvocationID: "late", Argv: argv})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	e.assertIdle(t)

	// Another argv than the prepared one: refused, and reclaimed.
	p, err = e.rt.PrepareEnclave(ctx, tpl, l, argv)
	require.NoError(t, err)
	o, _ = p.Run(ctx, nil, isolate.Job{InvocationID: "other", Argv: []string{"/enclave/bin/other"}})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind, "%s", o.Detail)
	e.assertIdle(t)

	// A file outside the layout's directory: refused before the job runs.
	p, err = e.rt.PrepareEnclave(ctx, tpl, l, argv)
	require.NoError(t, err)
	o, _ = p.Run(ctx, []enclave.RootFile{{Path: "/etc/task", Content: []byte("x")}}, isolate.Job{InvocationID: "bad", Argv: argv})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind, "%s", o.Detail)
	o, _ = p.Run(ctx, nil, isolate.Job{InvocationID: "again", Argv: argv})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind, "a prepared enclave is single-use")
	assert.NoError(t, p.Destroy(ctx), "Destroy after Run does nothing")
	e.assertIdle(t)
}

// enclavePrograms returns the pids of the programs named comm running in
// this run's sandboxes (their cgroup names the run), with the state each
// is in (/proc/PID/stat).
func enclavePrograms(t *testing.T, runID, comm string) map[int]string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	found := map[int]string{}
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(cg), runID) {
			continue
		}
		// pid (comm) state ...: the program's own cmdline is not
		// readable (it is not dumpable), its name is.
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(st)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i || j+3 > len(s) || s[i+1:j] != comm {
			continue
		}
		found[pid] = s[j+2 : j+3]
	}
	return found
}

// TestPreparedEnclaveStartsTheProgramAhead: a prepared enclave's program
// already runs, under every control, and waits on its start descriptor
// (asleep, a pipe at descriptor 3) before Run, which then writes the files
// and hands over the start; a program that ends before its start fails
// the invocation closed, and nothing is left either way.
func TestPreparedEnclaveStartsTheProgramAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newEnv(t)
	tpl, l, argv := loopEnclave(ctx, t, e, "ahead")
	require.Equal(t, isolate.BootstrapFD, agentloop.StartFD, "the loop waits where the runtime hands over")

	p, err := e.rt.PrepareEnclave(ctx, tpl, l, argv)
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Destroy(ctx)) }()
	// Init execs it as Prepare returns; it then waits on its start.
	var progs map[int]string
	require.Eventually(t, func() bool {
		progs = enclavePrograms(t, e.runID, "loop")
		return len(progs) == 1 && slices.Contains(slices.Collect(maps.Values(progs)), "S")
	}, 20*time.Second, 10*time.Millisecond, "the prepared enclave's program runs, asleep, before its invocation: %v", progs)
	for pid := range progs {
		st, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, isolate.BootstrapFD))
		require.NoError(t, err)
		assert.Equal(t, os.ModeNamedPipe, st.Mode()&os.ModeType, "on its start pipe")
		// Ended before its start: the invocation fails closed.
		require.NoError(t, unix.Kill(pid, unix.SIGKILL))
		require.Eventually(t, func() bool { return len(enclavePrograms(t, e.runID, "loop")) == 0 }, 10*time.Second, 10*time.Millisecond)
	}
	o, _ := p.Run(ctx, nil, isolate.Job{InvocationID: "ended", Argv: argv})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind, "%s", o.Detail)
	e.assertIdle(t)
}
