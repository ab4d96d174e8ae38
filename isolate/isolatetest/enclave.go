package isolatetest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/agentloop"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/policy"
)

// EnclaveRunner is a backend's RunEnclave.
type EnclaveRunner func(context.Context, isolate.Template, enclave.Layout, isolate.Job) (isolate.Outcome, []byte)

// EnclaveFixture is what an enclave test or benchmark runs the real loop
// with: the loop binary (built static, as the Makefile builds it), the
// loop's minimal root, a small seed and the loop's policy, parsed once as
// the broker parses it (a runtime compiles each policy it is given once).
type EnclaveFixture struct {
	Loop, Root, Seed string
	Policy           *policy.Policy
}

// NewEnclaveFixture builds the fixture in a temporary directory of t.
func NewEnclaveFixture(ctx context.Context, t testing.TB) *EnclaveFixture {
	t.Helper()
	work := t.TempDir()
	f := &EnclaveFixture{Loop: filepath.Join(work, "loop"), Root: filepath.Join(work, "root"), Seed: filepath.Join(work, "seed")}
	build := exec.CommandContext(ctx, "go", "build", "-o", f.Loop, "github.com/awf-project/awf/cmd/agent-loop")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the loop: %s", out)
	require.NoError(t, enclave.Root(ctx, f.Root, []string{"/enclave"}, nil))
	require.NoError(t, os.MkdirAll(f.Seed, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.Seed, "README"), []byte("hello\n"), 0o644))
	pol, err := policy.AgentLoop()
	require.NoError(t, err)
	f.Policy = pol
	return f
}

// NewEnclave makes the enclave network name of run runID. t's cleanup
// closes it and checks that nothing of the run's enclaves is left.
func NewEnclave(ctx context.Context, t testing.TB, runID, name string) *enclave.Enclave {
	t.Helper()
	n, err := enclave.New(ctx, enclave.Options{RunID: runID, Name: name})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, n.Close())
		assert.Empty(t, enclave.Resources(runID))
	})
	return n
}

// Run runs one invocation of the loop in the enclave network n on run:
// the layout with a boolean schema, a fresh loop configuration and the
// loop's policy (policy.AgentLoop), never weakened: every backend runs the
// loop under it.
func (f *EnclaveFixture) Run(ctx context.Context, t testing.TB, runID string, n *enclave.Enclave, run EnclaveRunner) (isolate.Outcome, []byte) {
	t.Helper()
	cfg, err := json.Marshal(agentloop.Config{Profile: agentloop.ProfileOpenAI, Model: "m", Endpoint: n.Endpoint(), Capability: "awf-cap-test",
		MaxModelRequests: 4, MaxModelTokens: 1000, MaxOutputBytes: 1024, DeadlineUnixMilli: time.Now().Add(20 * time.Second).UnixMilli(), AnthropicVersion: "2023-06-01"})
	require.NoError(t, err)
	l := enclave.Layout{
		Dir: "/enclave",
		Files: []enclave.RootFile{
			{Path: agentloop.TaskPath, Content: []byte("Is there a README?")},
			{Path: agentloop.SchemaPath, Content: []byte(`{"type":"boolean"}`)},
			{Path: agentloop.ConfigPath, Content: cfg},
		},
		Binds: []enclave.Bind{{Source: f.Seed, Path: agentloop.RepoDir}, {Source: f.Loop, Path: agentloop.BinaryPath, Exec: true}},
		Out:   agentloop.OutDir, OutBytes: isolate.DefaultLimits().QueryTmpfsBytes, Env: []string{"PATH=/enclave/bin", "HOME=/tmp"},
		Result: filepath.Base(agentloop.ResultPath), Transcript: filepath.Base(agentloop.TranscriptPath), TranscriptBytes: 1 << 20,
	}
	tpl := isolate.Template{RunID: runID, RootFS: f.Root, Limits: isolate.DefaultLimits(), Network: n.Network(), Policy: f.Policy}
	tpl.Limits.Wall = 30 * time.Second
	return run(ctx, tpl, l, isolate.Job{InvocationID: "loop-1", Argv: []string{agentloop.BinaryPath}})
}

// LoopProvider is a scripted OpenAI-shaped provider on an enclave's proxy
// end: every invocation's first request gets a list_files call, the second
// a finish with true. Model is the time spent answering.
type LoopProvider struct {
	mu     sync.Mutex
	bodies []string
	model  time.Duration
	srv    *http.Server
}

// ServeLoopProvider serves on n's listener until Close.
func ServeLoopProvider(n *enclave.Enclave) *LoopProvider { return ServeLoopProviderOn(n.Listener()) }

// ServeLoopProviderOn serves on l until Close: one scripted provider per
// link, so that each invocation's first request gets list_files and its
// second finish(true).
func ServeLoopProviderOn(l net.Listener) *LoopProvider {
	p := &LoopProvider{}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		p.mu.Lock()
		p.bodies = append(p.bodies, string(b))
		turn := len(p.bodies)
		p.mu.Unlock()
		name, args := "list_files", `{"path":"."}`
		if turn%2 == 0 {
			name, args = "finish", `{"result":true}`
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-t", "object": "chat.completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": nil,
				"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}}},
			"usage": map[string]any{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
		})
		p.mu.Lock()
		p.model += time.Since(t0)
		p.mu.Unlock()
	})}
	go func() { _ = p.srv.Serve(l) }()
	return p
}

// Bodies are the request bodies received so far.
func (p *LoopProvider) Bodies() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bodies...)
}

// Model is the total time spent answering.
func (p *LoopProvider) Model() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.model
}

// Close stops serving.
func (p *LoopProvider) Close() { _ = p.srv.Close() }

// CheckEnclaveLoop runs the real loop binary in a real enclave on a
// backend, with a scripted provider answering on the enclave's proxy end:
// the loop lists the seed, read-only at /enclave/repo, then finishes; the
// result and the transcript come back from the host side, and the enclave
// network leaves nothing behind.
func CheckEnclaveLoop(t *testing.T, runID string, run EnclaveRunner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := NewEnclaveFixture(ctx, t)
	n := NewEnclave(ctx, t, runID, "loop")
	p := ServeLoopProvider(n)
	defer p.Close()
	res, transcript := f.Run(ctx, t, runID, n, run)
	require.Equal(t, isolate.KindOK, res.Kind, "%s: %s %s\ntranscript:\n%s\nrequests: %d", res.Detail, res.Stdout, res.Stderr, transcript, len(p.Bodies()))
	assert.JSONEq(t, `true`, string(res.Output))
	assert.Contains(t, string(transcript), "README")
	bodies := p.Bodies()
	require.Len(t, bodies, 2)
	assert.Contains(t, bodies[1], "README", "list_files listed the read-only seed")
	assert.False(t, strings.Contains(string(transcript), "awf-cap-test"), "the capability never reaches the transcript")
}
