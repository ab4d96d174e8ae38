package direct_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// TestPreparedEnclaveSingleUse: a prepared enclave runs one job at most,
// only with the argv it was prepared for, and leaves nothing behind
// whether it ran, failed to start or was destroyed unused.
func TestPreparedEnclaveSingleUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newEnv(t)
	f := isolatetest.NewEnclaveFixture(ctx, t)
	n, err := enclave.New(ctx, enclave.Options{RunID: e.runID, Name: "prepared"})
	require.NoError(t, err)
	defer func() {
		assert.NoError(t, n.Close())
		assert.Empty(t, enclave.Resources(e.runID))
	}()
	tpl := isolate.Template{RunID: e.runID, RootFS: f.Root, Limits: isolate.DefaultLimits(), Network: n.Network(), Policy: f.Policy}
	l := enclave.Layout{
		Dir: "/enclave", Binds: []enclave.Bind{{Source: f.Seed, Path: "/enclave/repo"}, {Source: f.Loop, Path: "/enclave/bin/loop", Exec: true}},
		Out: "/enclave/out", OutBytes: 1 << 20, Result: "result.json", Transcript: "transcript.jsonl", TranscriptBytes: 1 << 20,
	}
	argv := []string{"/enclave/bin/loop"}

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
