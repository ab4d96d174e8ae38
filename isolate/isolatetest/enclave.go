package isolatetest

import (
	"context"
	"encoding/json"
	"io"
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

// CheckEnclaveLoop runs the real loop binary (built here, static) in a
// real enclave on a backend, with a scripted provider answering on the
// enclave's proxy end: the loop lists the seed, read-only at
// /enclave/repo, then finishes; the result and the transcript come back
// from the host side, and the enclave network leaves nothing behind.
func CheckEnclaveLoop(t *testing.T, runID string, run EnclaveRunner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := t.TempDir()
	loop := filepath.Join(work, "loop")
	build := exec.CommandContext(ctx, "go", "build", "-o", loop, "github.com/awf-project/awf/cmd/agent-loop")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the loop: %s", out)
	root := filepath.Join(work, "root")
	require.NoError(t, enclave.Root(ctx, root, []string{"/enclave"}, nil))
	seed := filepath.Join(work, "seed")
	require.NoError(t, os.MkdirAll(seed, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644))

	n, err := enclave.New(ctx, enclave.Options{RunID: runID, Name: "loop"})
	require.NoError(t, err)
	defer func() {
		assert.NoError(t, n.Close())
		assert.Empty(t, enclave.Resources(runID))
	}()

	var mu sync.Mutex
	var bodies []string
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		bodies = append(bodies, string(b))
		turn := len(bodies)
		mu.Unlock()
		name, args := "list_files", `{"path":"."}`
		if turn > 1 {
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
	})}
	go func() { _ = srv.Serve(n.Listener()) }()
	defer srv.Close()

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
		Binds: []enclave.Bind{{Source: seed, Path: agentloop.RepoDir}, {Source: loop, Path: agentloop.BinaryPath, Exec: true}},
		Out:   agentloop.OutDir, OutBytes: isolate.DefaultLimits().QueryTmpfsBytes, Env: []string{"PATH=/enclave/bin", "HOME=/tmp"},
		Result: filepath.Base(agentloop.ResultPath), Transcript: filepath.Base(agentloop.TranscriptPath), TranscriptBytes: 1 << 20,
	}
	pol, err := policy.Default()
	require.NoError(t, err)
	tpl := isolate.Template{RunID: runID, RootFS: root, Limits: isolate.DefaultLimits(), Network: n.Network(),
		// The loop's policy is not in place yet: as verify --enclave runs.
		Policy: pol, Weaken: isolate.Weakening{NoSeccomp: true}}
	tpl.Limits.Wall = 30 * time.Second
	res, transcript := run(ctx, tpl, l, isolate.Job{InvocationID: "loop-1", Argv: []string{agentloop.BinaryPath}})
	require.Equal(t, isolate.KindOK, res.Kind, "%s: %s %s", res.Detail, res.Stdout, res.Stderr)
	assert.JSONEq(t, `true`, string(res.Output))
	assert.Contains(t, string(transcript), "README")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 2)
	assert.Contains(t, bodies[1], "README", "list_files listed the read-only seed")

	assert.False(t, strings.Contains(string(transcript), "awf-cap-test"), "the capability never reaches the transcript")
}
