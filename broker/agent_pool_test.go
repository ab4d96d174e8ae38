package broker

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/pool"
)

// fakeEnclavePool is an enclave runtime's warm pool: a pool.Core whose
// prepared enclaves are their shapes, each used once. It records every
// prepare that ran beside a job or without the lane held.
type fakeEnclavePool struct {
	*pool.Core[Enclave]
	mu       sync.Mutex
	running  bool
	overlaps int
	unheld   int // prepares that ran without the lane held
}

func (p *fakeEnclavePool) Run(context.Context, isolate.Spec) isolate.Outcome {
	return isolate.Err(isolate.KindLaunchFailed, "no query in an enclave pool")
}

// poolingEnclaveRuntime is a fakeEnclaveRuntime that keeps enclaves
// prepared ahead (an EnclavePooler).
type poolingEnclaveRuntime struct {
	*fakeEnclaveRuntime
	lane chan struct{}
	pool *fakeEnclavePool
	warm []bool // per invocation: whether it ran in a prepared enclave
}

func (r *poolingEnclaveRuntime) EnclavePool(size int, ts []isolate.Template, shape func(isolate.Template) Enclave) (WarmPool, error) {
	p := &fakeEnclavePool{}
	c, err := pool.NewCore(size, ts, pool.Items[Enclave]{
		Runtime: r,
		Prepare: func(_ context.Context, t isolate.Template) (Enclave, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.running {
				p.overlaps++
			}
			if len(r.lane) == 0 {
				p.unheld++
			}
			return shape(t), nil
		},
		Destroy:        func(context.Context, Enclave) error { return nil },
		DestroyTimeout: time.Second,
		Pool:           "fake enclave pool",
		Item:           "enclave",
	})
	if err != nil {
		return nil, err
	}
	p.Core = c
	r.pool = p
	return p, nil
}

func (r *poolingEnclaveRuntime) RunEnclave(ctx context.Context, t isolate.Template, e Enclave) EnclaveOutcome {
	_, warm := r.pool.TakeIdle(t, func(shape Enclave) bool { return shape.SameShape(e) })
	r.pool.mu.Lock()
	r.pool.running = true
	r.pool.mu.Unlock()
	defer func() {
		r.pool.mu.Lock()
		r.pool.running = false
		r.pool.mu.Unlock()
	}()
	r.warm = append(r.warm, warm)
	return r.fakeEnclaveRuntime.RunEnclave(ctx, t, e)
}

func agentRequest(repo, schema, task string) string {
	return "POST /query HTTP/1.1\r\nHost: localhost\r\n" +
		"X-AWF-Agent-Version: 1\r\nX-AWF-Repo: " + repo + "\r\n" +
		"X-AWF-Schema-B64: " + base64.RawURLEncoding.EncodeToString([]byte(schema)) + "\r\n" +
		"Content-Type: application/octet-stream\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n", len(task)) + "\r\n" + task
}

// TestAgentWarmPool: a bounded-agent broker with a warm pool fills it
// before the first invocation and, through the server, refills it after
// each response on the lane the job held, so back-to-back invocations each
// run in an enclave prepared for exactly their template and shape; no fill
// overlaps a job, and Close empties the pool.
func TestAgentWarmPool(t *testing.T) {
	dir := t.TempDir()
	a := testAudit(t, dir, "bounded-agent.jsonl")
	iss := &fakeIssuer{}
	k, err := NewAgentKind(agentOptions(dir, iss))
	require.NoError(t, err)
	lane := make(chan struct{}, 1)
	rt := &poolingEnclaveRuntime{fakeEnclaveRuntime: &fakeEnclaveRuntime{iss: iss}, lane: lane}
	seeds := []Seed{{Repo: "o/r", Dir: "/seeds/r", Sensitivity: "public"}, {Repo: "o/s", Dir: "/seeds/s", Sensitivity: "public"}}
	b, err := New(Options{Kind: k, Runtime: rt, Template: testTemplate(),
		Seeds: seeds, MaxInvocations: 32, Timeout: 120 * time.Second, Audit: a, Lane: lane, WarmPool: 1})
	require.NoError(t, err)
	require.NotNil(t, rt.pool)
	require.Len(t, rt.pool.Templates(), 2, "one template per seed")
	ctx := context.Background()
	require.NoError(t, b.FillPool(ctx))
	assert.Equal(t, 2, rt.pool.Stats().Idle)

	srv, sock, done := serveOn(t, b)
	ts := &testServer{sock: sock}
	for i, repo := range []string{"o/r", "o/r", "o/s", "o/r"} {
		assert.Equal(t, okResponse(`{"status":"ok","result":true}`), ts.raw(t, agentRequest(repo, boolS, agentTaskText)), "invocation %d", i)
	}
	// One more request reaches the lane only after the last refill.
	assert.Equal(t, okResponse(string(KindErrorBody(k))), ts.raw(t, agentRequest("o/none", boolS, agentTaskText)))
	assert.Equal(t, []bool{true, true, true, true}, rt.warm, "every invocation found its enclave prepared")
	// Each prepared enclave was of the invocation's shape: the same
	// enclave but for its id and files.
	for i, e := range rt.enclaves {
		shape := k.shape("", e.SeedDir)
		assert.True(t, shape.SameShape(e), "invocation %d", i)
		assert.NotEmpty(t, e.InvocationID)
		assert.Len(t, e.Files, 3)
	}
	st := rt.pool.Stats()
	assert.Equal(t, 4, st.Warm)
	assert.Zero(t, st.Cold)
	assert.Zero(t, rt.pool.overlaps, "a fill ran beside a job")
	assert.Zero(t, rt.pool.unheld, "a fill ran without the lane")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(sctx))
	require.NoError(t, <-done)
	require.NoError(t, b.Close(ctx))
	assert.Equal(t, 2, rt.pool.Stats().Destroyed, "the idle enclaves are destroyed at Close")
	assert.Contains(t, auditText(t, dir, "bounded-agent.jsonl"), LifecyclePoolClosed)
}

// TestAgentWarmPoolNeedsAPooler: a bounded-agent broker asked for a warm
// pool on a runtime that cannot prepare enclaves ahead is refused, never
// built with a query pool.
func TestAgentWarmPoolNeedsAPooler(t *testing.T) {
	dir := t.TempDir()
	iss := &fakeIssuer{}
	k, err := NewAgentKind(agentOptions(dir, iss))
	require.NoError(t, err)
	_, err = New(Options{Kind: k, Runtime: &fakeEnclaveRuntime{iss: iss}, Template: testTemplate(),
		Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}, MaxInvocations: 8, Timeout: 120 * time.Second, WarmPool: 1})
	assert.ErrorContains(t, err, "prepares no enclave ahead")
	b, err := New(Options{Kind: k, Runtime: &fakeEnclaveRuntime{iss: iss}, Template: testTemplate(),
		Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}, MaxInvocations: 8, Timeout: 120 * time.Second})
	require.NoError(t, err)
	assert.Nil(t, b.pool)
}
