package broker

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/pool"
)

// fakeEnclavePool is an enclave runtime's warm pool: prepared enclaves
// are counters per template, each used once. It records every fill and
// whether a job ran meanwhile.
type fakeEnclavePool struct {
	mu       sync.Mutex
	size     int
	order    []isolate.Template
	shape    func(isolate.Template) Enclave
	idle     map[isolate.Template]int
	closed   bool
	running  bool
	fills    int
	overlaps int
	lane     chan struct{}
	unheld   int // fills that ran without the lane held
	stats    pool.Stats
}

func (p *fakeEnclavePool) Size() int { return p.size }

func (p *fakeEnclavePool) Missing() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	n := 0
	for _, t := range p.order {
		n += p.size - p.idle[t]
	}
	return n
}

func (p *fakeEnclavePool) Fill(context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fills++
	if p.running {
		p.overlaps++
	}
	if len(p.lane) == 0 {
		p.unheld++
	}
	made := 0
	for _, t := range p.order {
		for !p.closed && p.idle[t] < p.size {
			p.idle[t]++
			p.stats.Prepared++
			made++
		}
	}
	return made, nil
}

func (p *fakeEnclavePool) Close(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for t, n := range p.idle {
		p.stats.Destroyed += n
		delete(p.idle, t)
	}
	return nil
}

func (p *fakeEnclavePool) Stats() pool.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	for _, n := range p.idle {
		s.Idle += n
	}
	return s
}

func (p *fakeEnclavePool) Run(context.Context, isolate.Spec) isolate.Outcome {
	return isolate.Err(isolate.KindLaunchFailed, "no query in an enclave pool")
}

// take reports whether a prepared enclave for t of e's shape was there,
// and uses it up.
func (p *fakeEnclavePool) take(t isolate.Template, e Enclave) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.idle[t] == 0 || !p.shape(t).SameShape(e) {
		p.stats.Cold++
		return false
	}
	p.idle[t]--
	p.stats.Warm++
	return true
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
	r.pool = &fakeEnclavePool{size: size, order: ts, shape: shape, idle: map[isolate.Template]int{}, lane: r.lane}
	return r.pool, nil
}

func (r *poolingEnclaveRuntime) RunEnclave(ctx context.Context, t isolate.Template, e Enclave) EnclaveOutcome {
	warm := r.pool.take(t, e)
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
	a, err := OpenAudit(filepath.Join(dir, "audit"), "bounded-agent.jsonl")
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	iss := &fakeIssuer{}
	k, err := NewAgentKind(agentOptions(dir, iss))
	require.NoError(t, err)
	lane := make(chan struct{}, 1)
	rt := &poolingEnclaveRuntime{fakeEnclaveRuntime: &fakeEnclaveRuntime{iss: iss}, lane: lane}
	seeds := []Seed{{Repo: "o/r", Dir: "/seeds/r", Sensitivity: "public"}, {Repo: "o/s", Dir: "/seeds/s", Sensitivity: "public"}}
	b, err := New(Options{Kind: k, Runtime: rt, Template: isolate.Template{RunID: "r", Limits: isolate.DefaultLimits()},
		Seeds: seeds, MaxInvocations: 32, Timeout: 120 * time.Second, Audit: a, Lane: lane, WarmPool: 1})
	require.NoError(t, err)
	require.NotNil(t, rt.pool)
	require.Len(t, rt.pool.order, 2, "one template per seed")
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
	assert.Contains(t, readAudit(t, filepath.Join(dir, "audit", "bounded-agent.jsonl")), LifecyclePoolClosed)
}

// TestAgentWarmPoolNeedsAPooler: a bounded-agent broker asked for a warm
// pool on a runtime that cannot prepare enclaves ahead is refused, never
// built with a query pool.
func TestAgentWarmPoolNeedsAPooler(t *testing.T) {
	dir := t.TempDir()
	iss := &fakeIssuer{}
	k, err := NewAgentKind(agentOptions(dir, iss))
	require.NoError(t, err)
	_, err = New(Options{Kind: k, Runtime: &fakeEnclaveRuntime{iss: iss}, Template: isolate.Template{RunID: "r", Limits: isolate.DefaultLimits()},
		Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}, MaxInvocations: 8, Timeout: 120 * time.Second, WarmPool: 1})
	assert.ErrorContains(t, err, "prepares no enclave ahead")
	b, err := New(Options{Kind: k, Runtime: &fakeEnclaveRuntime{iss: iss}, Template: isolate.Template{RunID: "r", Limits: isolate.DefaultLimits()},
		Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}, MaxInvocations: 8, Timeout: 120 * time.Second})
	require.NoError(t, err)
	assert.Nil(t, b.pool)
}
