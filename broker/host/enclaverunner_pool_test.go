package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
)

func init() {
	// libcontainer re-executes this test binary as a direct sandbox's init
	// (TestPreparedEnclaveLooksCold).
	direct.InitIfRequested()
}

// fakePrepared is a prepared sandbox that records how it ends.
type fakePrepared struct {
	mu        sync.Mutex
	net       *isolate.Network
	ran       []string // the invocations it ran
	destroyed bool
}

func (f *fakePrepared) Run(_ context.Context, e broker.Enclave) broker.EnclaveOutcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.destroyed || len(f.ran) > 0 {
		return broker.EnclaveOutcome{Outcome: isolate.Err(isolate.KindLaunchFailed, "used")}
	}
	f.ran = append(f.ran, e.InvocationID)
	f.destroyed = true
	return broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}}
}

func (f *fakePrepared) Destroy(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed = true
	return nil
}

// fakeBackend prepares fakePrepared sandboxes (or fails to) and runs cold
// ones, counting both.
type fakeBackend struct {
	mu       sync.Mutex
	prepared []*fakePrepared
	failNext error
	cold     []string
}

func (b *fakeBackend) prepare(_ context.Context, t isolate.Template, e broker.Enclave) (preparedSandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.Network == nil || e.InvocationID != "" || len(e.Files) > 0 {
		return nil, errors.New("prepared without its network, or with an invocation's id or files")
	}
	if err := b.failNext; err != nil {
		b.failNext = nil
		return nil, err
	}
	p := &fakePrepared{net: t.Network}
	b.prepared = append(b.prepared, p)
	return p, nil
}

func (b *fakeBackend) sandbox(_ context.Context, t isolate.Template, e broker.Enclave) broker.EnclaveOutcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cold = append(b.cold, e.InvocationID)
	return broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}}
}

func TestEnclavePoolIsSingleUseAndKeyedByTemplateAndShape(t *testing.T) {
	requireRootNetNS(t)
	ctx := context.Background()
	runID := testRunID()
	fb := &fakeBackend{}
	h := &fakeHandoff{}
	r := &enclaveRuntime{Runtime: &enclaveFake{}, runID: runID, proxy: h, sandbox: fb.sandbox, prepare: fb.prepare, newNetwork: enclave.New}
	defer func() { assert.Empty(t, enclave.Resources(runID), "an enclave network outlived the test") }()
	shape := testEnclave("")
	shape.Proxy = netipProxy()
	t1 := isolate.Template{RunID: runID, Repo: "/seeds/a", Limits: isolate.DefaultLimits()}
	t2 := t1
	t2.Repo = "/seeds/b"
	wp, err := r.EnclavePool(1, []isolate.Template{t1, t2, t1}, func(isolate.Template) broker.Enclave { return shape })
	require.NoError(t, err)
	defer func() { assert.NoError(t, wp.Close(ctx)) }()
	_, err = r.EnclavePool(1, []isolate.Template{t1}, func(isolate.Template) broker.Enclave { return shape })
	assert.Error(t, err, "one pool per runtime")

	assert.Equal(t, 2, wp.Missing(), "one per template, the duplicate counted once")
	n, err := wp.Fill(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, 0, wp.Missing())
	require.Len(t, fb.prepared, 2)
	assert.NotEqual(t, fb.prepared[0].net.NetNS, fb.prepared[1].net.NetNS, "each prepared enclave has its own network")

	inv := func(id string) broker.Enclave {
		e := shape
		e.InvocationID = id
		e.Files = []broker.EnclaveFile{{Path: broker.EnclaveTaskPath, Content: []byte("task")}}
		return e
	}
	// The first invocation against t1 takes t1's prepared enclave and uses
	// it up, network and all; the next one is cold.
	out := r.RunEnclave(ctx, t1, inv("aa"))
	assert.Equal(t, isolate.KindOK, out.Kind, out.Detail)
	assert.Equal(t, []string{"aa"}, fb.prepared[0].ran)
	_, err = os.Stat(fb.prepared[0].net.NetNS)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the prepared enclave's network outlived its invocation")
	assert.Equal(t, []string{"listener-1"}, h.unlistened, "the proxy end is handed over and taken back by the invocation")
	out = r.RunEnclave(ctx, t1, inv("bb"))
	assert.Equal(t, isolate.KindOK, out.Kind, out.Detail)
	assert.Equal(t, []string{"bb"}, fb.cold, "a used enclave is never handed out again")
	assert.Equal(t, 1, wp.Missing())

	// A template that differs in anything is another key: cold.
	t3 := t2
	t3.Limits.Pids++
	assert.Equal(t, isolate.KindOK, r.RunEnclave(ctx, t3, inv("cc")).Kind)
	assert.Equal(t, []string{"bb", "cc"}, fb.cold)
	assert.Empty(t, fb.prepared[1].ran)

	// An invocation of another shape never runs in it: it is destroyed.
	other := inv("dd")
	other.Env = append(other.Env, "X=1")
	assert.Equal(t, isolate.KindOK, r.RunEnclave(ctx, t2, other).Kind)
	assert.Equal(t, []string{"bb", "cc", "dd"}, fb.cold)
	assert.Empty(t, fb.prepared[1].ran)
	assert.True(t, fb.prepared[1].destroyed)
	_, err = os.Stat(fb.prepared[1].net.NetNS)
	assert.True(t, errors.Is(err, os.ErrNotExist))

	st := wp.Stats()
	assert.Equal(t, 1, st.Warm)
	assert.Equal(t, 3, st.Cold)
	assert.Equal(t, 2, st.Prepared)
	assert.Equal(t, 0, st.Idle)
}

func TestEnclavePoolFailsClosed(t *testing.T) {
	requireRootNetNS(t)
	ctx := context.Background()
	runID := testRunID()
	defer func() { assert.Empty(t, enclave.Resources(runID), "an enclave network outlived the test") }()
	shape := testEnclave("")
	shape.Proxy = netipProxy()
	tpl := isolate.Template{RunID: runID, Repo: "/seeds/a", Limits: isolate.DefaultLimits()}
	inv := shape
	inv.InvocationID = "ee"

	t.Run("a failed prepare leaves no network and the next invocation cold", func(t *testing.T) {
		fb := &fakeBackend{failNext: errors.New("no init")}
		r := &enclaveRuntime{Runtime: &enclaveFake{}, runID: runID, proxy: &fakeHandoff{}, sandbox: fb.sandbox, prepare: fb.prepare, newNetwork: enclave.New}
		wp, err := r.EnclavePool(1, []isolate.Template{tpl}, func(isolate.Template) broker.Enclave { return shape })
		require.NoError(t, err)
		n, err := wp.Fill(ctx)
		assert.ErrorContains(t, err, "no init")
		assert.Zero(t, n)
		assert.Empty(t, enclave.Resources(runID))
		assert.Equal(t, 1, wp.Stats().Failed)
		assert.Equal(t, isolate.KindOK, r.RunEnclave(ctx, tpl, inv).Kind)
		assert.Equal(t, []string{"ee"}, fb.cold)
		require.NoError(t, wp.Close(ctx))
	})
	t.Run("a refused hand-off destroys the prepared enclave unused", func(t *testing.T) {
		fb := &fakeBackend{}
		r := &enclaveRuntime{Runtime: &enclaveFake{}, runID: runID, proxy: &fakeHandoff{listenErr: errors.New("proxy gone")}, sandbox: fb.sandbox, prepare: fb.prepare, newNetwork: enclave.New}
		wp, err := r.EnclavePool(1, []isolate.Template{tpl}, func(isolate.Template) broker.Enclave { return shape })
		require.NoError(t, err)
		_, err = wp.Fill(ctx)
		require.NoError(t, err)
		assert.Equal(t, isolate.KindLaunchFailed, r.RunEnclave(ctx, tpl, inv).Kind)
		require.Len(t, fb.prepared, 1)
		assert.True(t, fb.prepared[0].destroyed)
		assert.Empty(t, fb.prepared[0].ran)
		assert.Empty(t, fb.cold, "never a cold run in its place")
		assert.Empty(t, enclave.Resources(runID))
		require.NoError(t, wp.Close(ctx))
	})
	t.Run("Close destroys the idle enclaves; later invocations are cold and Fill does nothing", func(t *testing.T) {
		fb := &fakeBackend{}
		r := &enclaveRuntime{Runtime: &enclaveFake{}, runID: runID, proxy: &fakeHandoff{}, sandbox: fb.sandbox, prepare: fb.prepare, newNetwork: enclave.New}
		wp, err := r.EnclavePool(2, []isolate.Template{tpl}, func(isolate.Template) broker.Enclave { return shape })
		require.NoError(t, err)
		_, err = wp.Fill(ctx)
		require.NoError(t, err)
		require.Len(t, enclave.Resources(runID), 2*2, "two networks of two namespaces each")
		require.NoError(t, wp.Close(ctx))
		assert.Empty(t, enclave.Resources(runID))
		for _, p := range fb.prepared {
			assert.True(t, p.destroyed)
		}
		assert.Equal(t, 2, wp.Stats().Destroyed)
		assert.Zero(t, wp.Missing())
		n, err := wp.Fill(ctx)
		assert.NoError(t, err)
		assert.Zero(t, n)
		assert.Equal(t, isolate.KindOK, r.RunEnclave(ctx, tpl, inv).Kind)
		assert.Equal(t, []string{"ee"}, fb.cold)
	})
	t.Run("a runtime that cannot prepare has no pool", func(t *testing.T) {
		r := &enclaveRuntime{Runtime: &enclaveFake{}, runID: runID, proxy: &fakeHandoff{}, newNetwork: enclave.New}
		_, err := r.EnclavePool(1, []isolate.Template{tpl}, func(isolate.Template) broker.Enclave { return shape })
		assert.Error(t, err)
		assert.Nil(t, r.pool)
	})
}

// buildObserver builds testdata/enclaveobserve static, as the loop is.
func buildObserver(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "observe")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testdata/enclaveobserve")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the observer: %s", out)
	return bin
}

// TestPreparedEnclaveLooksCold runs one observer (testdata/enclaveobserve:
// its process, credentials, limits, cgroup, mounts, files, descriptors,
// environment, hostname, and the network namespace's interfaces, counters,
// routes, neighbours and sockets) in place of the loop on direct, through
// the broker's own enclave path: once cold, once in an enclave the pool
// prepared ahead and left idle, and wants the same observations from both.
// What differs is the age of the process and of its tmpfs mounts, which
// the test reports (docs/security.md).
func TestPreparedEnclaveLooksCold(t *testing.T) {
	requireRootNetNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runID := testRunID()
	work := t.TempDir()
	rt, err := direct.Open(isolate.HostConfig{RunID: runID, StateDir: filepath.Join(work, "state")})
	require.NoError(t, err)
	defer func() {
		assert.NoError(t, rt.Sweep(context.Background()))
		assert.NoError(t, rt.Close())
		assert.Empty(t, enclave.Resources(runID), "an enclave network outlived the test")
	}()
	root := filepath.Join(work, "root")
	require.NoError(t, buildEnclaveRoot(ctx, root))
	pol, err := policy.AgentLoop()
	require.NoError(t, err)
	seed := filepath.Join(work, "seed")
	require.NoError(t, os.MkdirAll(filepath.Join(seed, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "src", "main.go"), []byte("package main\n"), 0o644))

	r := &enclaveRuntime{Runtime: rt, runID: runID, proxy: &fakeHandoff{}, newNetwork: enclave.New,
		sandbox: backendSandbox(rt, root, pol), prepare: backendPrepare(rt, root, pol)}
	require.NotNil(t, r.sandbox)
	require.NotNil(t, r.prepare, "direct prepares enclaves ahead")
	lim := isolate.DefaultLimits()
	lim.Wall = 30 * time.Second
	shape := broker.Enclave{SeedDir: seed, LoopBinary: buildObserver(ctx, t), Argv: []string{broker.EnclaveLoopPath},
		Env: []string{"PATH=/enclave/bin", "LANG=C.UTF-8", "HOME=/tmp"}, UID: isolate.SandboxUID, GID: isolate.SandboxGID,
		NoNewPrivileges: true, Limits: lim, Proxy: netipProxy(), ResultBytes: 8192, TranscriptBytes: broker.MaxTranscriptBytes}
	tpl := isolate.Template{RunID: runID, RootFS: root, Repo: seed, Limits: lim, Policy: pol}
	wp, err := r.EnclavePool(1, []isolate.Template{tpl}, func(isolate.Template) broker.Enclave { return shape })
	require.NoError(t, err)
	defer func() { assert.NoError(t, wp.Close(context.Background())) }()
	inv := func(id string) broker.Enclave {
		e := shape
		e.InvocationID = id
		e.Files = []broker.EnclaveFile{
			{Path: broker.EnclaveTaskPath, Content: []byte("What is here?")},
			{Path: broker.EnclaveSchemaPath, Content: []byte(`{"type":"boolean"}`)},
			{Path: broker.EnclaveLoopConfigPath, Content: []byte(`{"profile":"openai"}`)},
		}
		return e
	}
	type observation struct {
		Observed json.RawMessage  `json:"observed"`
		Ages     map[string]int64 `json:"ages"`
	}
	observe := func(id string) observation {
		out := r.RunEnclave(ctx, tpl, inv(id))
		require.Equal(t, isolate.KindOK, out.Kind, "%s: %s", out.Detail, out.Stderr)
		assert.Equal(t, "true", string(out.Output))
		var o observation
		require.NoError(t, json.Unmarshal(out.Transcript, &o), "%s", out.Transcript)
		return o
	}

	// The pool is empty: cold.
	cold := observe("0123456789abcdef00000001")
	require.Equal(t, 1, wp.Stats().Cold)
	n, err := wp.Fill(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	const idle = 2 * time.Second
	time.Sleep(idle)
	warm := observe("0123456789abcdef00000002")
	require.Equal(t, 1, wp.Stats().Warm, "the second invocation ran in the prepared enclave")

	require.JSONEq(t, string(cold.Observed), string(warm.Observed))
	var obs struct {
		Args []string `json:"args"`
		Env  []string `json:"env"`
		Net  []string `json:"net"`
		Cwd  bool     `json:"cwdIsTmp"`
		Tree []string `json:"tree"`
	}
	require.NoError(t, json.Unmarshal(warm.Observed, &obs))
	assert.Equal(t, []string{broker.EnclaveLoopPath}, obs.Args)
	// The layout's environment, and the variable that tells the program
	// it is handed its start (cold and prepared alike, on direct).
	assert.Equal(t, append(slices.Clone(shape.Env), proto.EnclaveStartEnv+"=3"), obs.Env)
	assert.True(t, obs.Cwd)
	assert.NotEmpty(t, obs.Tree)
	if dump := os.Getenv("AWF_TEST_DUMP_OBSERVATION"); dump != "" {
		require.NoError(t, os.WriteFile(dump, warm.Observed, 0o600))
	}
	// The residual: the enclave's tmpfs mounts, and the program's own
	// process (started at prepare time, then blocked on its start), are
	// as old as the enclave, so a program in a prepared one can tell how
	// long it waited (not what ran before it: nothing did). The read-only directory is as new as
	// the invocation's files in both.
	t.Logf("ages (ms): cold %v, prepared after %v idle %v", cold.Ages, idle, warm.Ages)
	for _, p := range []string{broker.EnclaveOutDir, broker.EnclaveTmpDir} {
		assert.GreaterOrEqual(t, warm.Ages[p], idle.Milliseconds()-10, "%s of the prepared enclave was mounted before the invocation", p)
		assert.Less(t, cold.Ages[p], idle.Milliseconds())
	}
}

// TestDirectPreparesEnclavesAhead: the direct runtime as the broker opens
// it prepares enclaves ahead, so that boundedAgents.warmPool takes effect
// there; the backend prepares nothing without the loop's policy.
func TestDirectPreparesEnclavesAhead(t *testing.T) {
	rt, err := runtimes.Open("direct", isolate.HostConfig{RunID: testRunID(), StateDir: filepath.Join(t.TempDir(), "state")})
	require.NoError(t, err)
	defer func() { assert.NoError(t, rt.Close()) }()
	pol, err := policy.AgentLoop()
	require.NoError(t, err)
	assert.NotNil(t, backendPrepare(rt, "/root", pol))
	assert.Nil(t, backendPrepare(rt, "/root", nil))
	assert.Nil(t, backendPrepare(&enclaveFake{}, "/root", pol), "a runtime that does not prepare enclaves")
}

// TestPreparedEnclaveSweptAfterACrash: a broker that dies with enclaves
// prepared leaves a waiting sandbox (its program started, blocked on its
// start) and its network; the next runtime on
// the same state dir reclaims the sandbox from the journal, and the
// teardown's enclave sweep removes the network.
func TestPreparedEnclaveSweptAfterACrash(t *testing.T) {
	requireRootNetNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runID := testRunID()
	work := t.TempDir()
	h := isolate.HostConfig{RunID: runID, StateDir: filepath.Join(work, "state")}
	rt, err := direct.Open(h)
	require.NoError(t, err)
	closed, swept := false, false
	defer func() {
		if swept {
			return
		}
		// A failure before the sweep: reclaim what the test made.
		if !closed {
			assert.NoError(t, rt.Close())
		}
		if rt3, err := direct.Open(h); assert.NoError(t, err) {
			assert.NoError(t, rt3.Sweep(ctx))
			assert.NoError(t, rt3.Close())
		}
		assert.NoError(t, enclave.SweepRuns(ctx, func(r string) bool { return r != runID }))
	}()
	root := filepath.Join(work, "root")
	require.NoError(t, buildEnclaveRoot(ctx, root))
	pol, err := policy.AgentLoop()
	require.NoError(t, err)
	seed := filepath.Join(work, "seed")
	require.NoError(t, os.MkdirAll(seed, 0o755))
	r := &enclaveRuntime{Runtime: rt, runID: runID, proxy: &fakeHandoff{}, newNetwork: enclave.New,
		sandbox: backendSandbox(rt, root, pol), prepare: backendPrepare(rt, root, pol)}
	lim := isolate.DefaultLimits()
	// A program that waits for its start, as the loop does.
	shape := broker.Enclave{SeedDir: seed, LoopBinary: buildObserver(ctx, t), Argv: []string{broker.EnclaveLoopPath},
		Env: []string{"PATH=/enclave/bin"}, UID: isolate.SandboxUID, GID: isolate.SandboxGID,
		NoNewPrivileges: true, Limits: lim, Proxy: netipProxy(), ResultBytes: 8192, TranscriptBytes: broker.MaxTranscriptBytes}
	tpl := isolate.Template{RunID: runID, RootFS: root, Repo: seed, Limits: lim, Policy: pol}
	wp, err := r.EnclavePool(2, []isolate.Template{tpl}, func(isolate.Template) broker.Enclave { return shape })
	require.NoError(t, err)
	n, err := wp.Fill(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NotEmpty(t, enclave.Resources(runID))
	require.Len(t, sandboxProcesses(t, runID), 2, "each prepared enclave's program waits for its start")
	// The crash: the runtime lets go of its state dir without destroying
	// anything (no pool Close, no Sweep).
	closed = true
	require.NoError(t, rt.Close())

	rt2, err := direct.Open(h)
	require.NoError(t, err)
	defer func() { assert.NoError(t, rt2.Close()) }()
	require.NoError(t, rt2.Sweep(ctx), "the journal names the prepared sandboxes")
	require.NoError(t, rt2.Usable())
	require.NoError(t, enclave.SweepRuns(ctx, func(r string) bool { return r != runID }))
	swept = true
	assert.Empty(t, enclave.Resources(runID), "an enclave network outlived the sweep")
	assert.Empty(t, sandboxProcesses(t, runID), "a waiting init of the run outlived the sweep")
}

// sandboxProcesses lists the processes in a cgroup of the run's sandboxes.
func sandboxProcesses(t *testing.T, runID string) []string {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		if cg, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cgroup")); err == nil && strings.Contains(string(cg), "awf-"+runID+"-") {
			out = append(out, p.Name())
		}
	}
	return out
}
