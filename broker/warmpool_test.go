package broker

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// pooledSandboxes is a fake runtime's supply of sandboxes for the warm
// pool: each logs its prepare, exec and destroy, and the supply notes a
// prepare that happens while any job runs.
type pooledSandboxes struct {
	mu       sync.Mutex
	log      *eventLog
	clock    *fakeClock
	made     []*pooledSandbox
	running  int      // jobs executing now, on any broker of the lane
	overlaps []string // prepares that happened while a job ran
	// gate, when set, is received from before each prepare returns.
	gate chan struct{}
}

type pooledSandbox struct {
	s         *pooledSandboxes
	t         isolate.Template
	n         int
	at        time.Duration // the clock when its prepare began (with a clock)
	jobs      int
	destroyed bool
}

func (s *pooledSandboxes) prepare(t isolate.Template) (isolate.Sandbox, error) {
	s.mu.Lock()
	if s.running > 0 {
		s.overlaps = append(s.overlaps, t.Repo)
	}
	sb := &pooledSandbox{s: s, t: t, n: len(s.made)}
	if s.clock != nil {
		sb.at = s.clock.Now()
	}
	s.made = append(s.made, sb)
	gate := s.gate
	s.mu.Unlock()
	if s.clock != nil {
		s.clock.advance(20 * time.Millisecond)
	}
	s.log.add("prepare")
	if gate != nil {
		<-gate
	}
	return sb, nil
}

// jobStarted and jobEnded let a job of another broker on the lane count
// as running.
func (s *pooledSandboxes) jobStarted() { s.mu.Lock(); s.running++; s.mu.Unlock() }
func (s *pooledSandboxes) jobEnded()   { s.mu.Lock(); s.running--; s.mu.Unlock() }

func (sb *pooledSandbox) Exec(_ context.Context, j isolate.Job) isolate.Outcome {
	s := sb.s
	s.mu.Lock()
	sb.jobs++
	used := sb.jobs > 1 || sb.destroyed
	s.running++
	s.mu.Unlock()
	defer s.jobEnded()
	s.log.add("exec")
	if s.clock != nil {
		s.clock.advance(5 * time.Millisecond)
	}
	if used {
		return isolate.Err(isolate.KindLaunchFailed, "sandbox %d reused", sb.n)
	}
	return isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}
}

func (sb *pooledSandbox) Destroy(context.Context) error {
	sb.s.mu.Lock()
	sb.destroyed = true
	sb.s.mu.Unlock()
	sb.s.log.add("destroy")
	return nil
}

func (s *pooledSandboxes) state() (made []pooledSandbox, overlaps []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range s.made {
		made = append(made, *sb)
	}
	return made, append([]string(nil), s.overlaps...)
}

// pooledBroker is a query broker over a fake runtime whose sandboxes come
// from sup, with a warm pool of size; the string is the test directory
// whose audit log poolAudit reads.
func pooledBroker(t *testing.T, size int, sup *pooledSandboxes, clock Clock, fr Freezer, lane chan struct{}, seeds ...Seed) (*Broker, *fakeRuntime, string) {
	t.Helper()
	dir := t.TempDir()
	a := testAudit(t, dir, "bounded-query.jsonl")
	rt := &fakeRuntime{}
	if sup != nil {
		rt.prepare = sup.prepare
	}
	b, err := New(Options{Kind: QueryKind{}, Runtime: rt, Template: testTemplate(),
		Seeds: seeds, MaxInvocations: 32, Timeout: 30 * time.Second, Clock: clock, Audit: a, Freezer: fr, Lane: lane, WarmPool: size})
	require.NoError(t, err)
	return b, rt, dir
}

// poolAudit is the audit log of the pooledBroker made in dir.
func poolAudit(t *testing.T, dir string) string { return auditText(t, dir, "bounded-query.jsonl") }

// TestWarmPoolZeroIsTodaysPipeline: without a pool nothing is prepared
// ahead (the fake runtime panics on Prepare), the runtime's own Run gets
// the same spec as before, and the pool's calls are no-ops that take no
// lane and write no record.
func TestWarmPoolZeroIsTodaysPipeline(t *testing.T) {
	clock := &fakeClock{}
	lane := make(chan struct{}, 1)
	b, rt, dir := pooledBroker(t, 0, nil, clock, nil, lane, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "internal"})
	ctx := context.Background()
	lane <- struct{}{} // a pool call that took the lane would block here
	require.NoError(t, b.FillPool(ctx))
	b.Refill(ctx)
	require.NoError(t, b.Close(ctx))
	<-lane

	body := b.Handle(ctx, queryReq("o/r", boolS, script))
	assert.Equal(t, `{"status":"ok","result":true}`, string(body))
	b.Refill(ctx)
	require.Equal(t, 1, rt.runs())
	want := isolate.Template{RunID: "r", Repo: "/seeds/x", Limits: isolate.DefaultLimits()}
	want.Limits.Wall = 30 * time.Second
	assert.Equal(t, want, rt.jobs[0].Template)
	assert.NotContains(t, poolAudit(t, dir), `"event":"pool-`)
}

// TestWarmPoolWindow checks where the pool's work falls: the first fill
// before this request, held to its own bucket; inside a request only the exec and the destroy,
// between the freeze and the bucket, as a cold run would be; the refill
// only after the response and the thaw, held to its own bucket. The job
// runs in the sandbox prepared ahead, and the refill makes a new one.
func TestWarmPoolWindow(t *testing.T) {
	clock := &fakeClock{}
	log := &eventLog{clock: clock}
	sup := &pooledSandboxes{log: log, clock: clock}
	fr := &fakeFreezer{log: log}
	b, rt, dir := pooledBroker(t, 1, sup, loggingClock{clock, log}, fr, nil, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "internal"})
	fr.debitSeen = func() int64 { return b.Ledger().Balance("o/r") }
	ctx := context.Background()

	require.NoError(t, b.FillPool(ctx))
	log.add("filled")
	start := clock.Now()
	body := b.Handle(ctx, queryReq("o/r", boolS, script))
	log.add("respond")
	answered := clock.Now() - start
	b.Refill(ctx)
	log.add("refilled")

	assert.Equal(t, `{"status":"ok","result":true}`, string(body))
	assert.Equal(t, []string{"prepare", "bucket", "filled", "freeze", "exec", "destroy", "bucket", "thaw", "respond", "prepare", "bucket", "refilled"}, log.list())
	assert.Equal(t, 10*time.Millisecond, answered, "the warm request is in the 10 ms bucket: its prepare was outside")
	assert.Equal(t, 100*time.Millisecond, log.at["refilled"]-log.at["respond"], "the refill holds the lane to the bucket of its own 20 ms")
	assert.Zero(t, rt.runs(), "the runtime's own Run is not used with a pool")
	made, overlaps := sup.state()
	require.Len(t, made, 2)
	assert.Equal(t, 1, made[0].jobs)
	assert.True(t, made[0].destroyed)
	assert.Zero(t, made[1].jobs, "the refill's sandbox is new")
	assert.False(t, made[1].destroyed)
	assert.Empty(t, overlaps)
	wantT := isolate.Template{RunID: "r", Repo: "/seeds/x", Limits: isolate.DefaultLimits()}
	wantT.Limits.Wall = 30 * time.Second
	assert.Equal(t, wantT, made[0].t, "the pool is keyed by the request's own template")

	require.NoError(t, b.Close(ctx))
	made, _ = sup.state()
	assert.True(t, made[1].destroyed, "Close destroys the idle one")
	a := poolAudit(t, dir)
	assert.Contains(t, a, `"event":"pool-filled","detail":"idle=1 seeds=1 size=1 backend=fake"`)
	assert.Contains(t, a, `"event":"pool-closed","detail":"warm=1 cold=0 prepared=2 failed=0 destroyed=1"`)
}

// TestWarmPoolKeysBySeed: each seed's request gets a sandbox prepared for
// its own seed, never another's, and a used sandbox is never handed out.
func TestWarmPoolKeysBySeed(t *testing.T) {
	log := &eventLog{clock: &fakeClock{}}
	sup := &pooledSandboxes{log: log}
	seeds := []Seed{{Repo: "o/a", Dir: "/seeds/a", Sensitivity: "public"}, {Repo: "o/b", Dir: "/seeds/b", Sensitivity: "public"}}
	b, _, _ := pooledBroker(t, 2, sup, NewMonotonicClock(), nil, nil, seeds...)
	ctx := context.Background()
	require.NoError(t, b.FillPool(ctx))
	var execs []string
	for _, repo := range []string{"o/a", "o/b", "o/b", "o/a", "o/b", "o/b"} {
		body := b.Handle(ctx, queryReq(repo, boolS, script))
		require.Equal(t, `{"status":"ok","result":true}`, string(body), repo)
		execs = append(execs, repo)
		b.Refill(ctx)
	}
	made, overlaps := sup.state()
	assert.Empty(t, overlaps)
	require.Len(t, made, 4+len(execs))
	used := map[string]int{}
	for _, sb := range made {
		assert.LessOrEqual(t, sb.jobs, 1, "sandbox %d", sb.n)
		assert.Equal(t, sb.jobs == 1, sb.destroyed, "sandbox %d", sb.n)
		if sb.jobs == 1 {
			used[sb.t.Repo]++
		}
	}
	assert.Equal(t, map[string]int{"/seeds/a": 2, "/seeds/b": 4}, used)
	assert.Equal(t, len(execs), b.pool.Stats().Warm)
	assert.Zero(t, b.pool.Stats().Cold)
	require.NoError(t, b.Close(ctx))
}

// waiting fails the test when done delivers within 200 ms: what it
// stands for must still be waiting. It tests an order, not a time: 200 ms
// is every chance for something that ignores what it waits for to finish.
func waiting[T any](t *testing.T, done <-chan T, what string) {
	t.Helper()
	select {
	case v := <-done:
		t.Fatalf("%s finished (%v)", what, v)
	case <-time.After(200 * time.Millisecond):
	}
}

// blockingBroker is a second broker on lane (sealed probes beside
// queries), without a pool, whose job counts as running in sup, logs
// other-exec and other-end, and blocks until release is closed; started
// is closed once it runs.
func blockingBroker(t *testing.T, sup *pooledSandboxes, lane chan struct{}, seed Seed) (other *Broker, started, release chan struct{}) {
	t.Helper()
	other, ort, _ := pooledBroker(t, 0, nil, NewMonotonicClock(), nil, lane, seed)
	release, started = make(chan struct{}), make(chan struct{})
	ort.outcome = func(isolate.Spec) isolate.Outcome {
		sup.jobStarted()
		defer sup.jobEnded()
		sup.log.add("other-exec")
		close(started)
		<-release
		sup.log.add("other-end")
		return isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}
	}
	return other, started, release
}

// TestRefillNeverOverlapsAJob: a refill that is due while another broker
// of the lane runs a job waits for that job to end; and through the
// server, the refill starts only once the response has been written (a
// blocked refill does not delay the client's answer), Shutdown does not
// wait for it, and Close does, then destroys what it prepared.
func TestRefillNeverOverlapsAJob(t *testing.T) {
	log := &eventLog{clock: &fakeClock{}}
	sup := &pooledSandboxes{log: log}
	lane := make(chan struct{}, 1)
	seed := Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "public"}
	q, _, _ := pooledBroker(t, 1, sup, NewMonotonicClock(), nil, lane, seed)
	other, started, release := blockingBroker(t, sup, lane, seed)
	ctx := context.Background()
	require.NoError(t, q.FillPool(ctx))
	require.Equal(t, `{"status":"ok","result":true}`, string(q.Handle(ctx, queryReq("o/r", boolS, script))))
	require.Equal(t, 1, q.pool.Missing())

	otherDone := make(chan []byte, 1)
	go func() { otherDone <- other.Handle(ctx, queryReq("o/r", boolS, script)) }()
	<-started
	refilled := make(chan struct{})
	go func() { q.Refill(ctx); close(refilled) }()
	// Give a refill that ignored the lane every chance to run now.
	waiting(t, refilled, "the refill, while another broker's job ran,")
	close(release)
	assert.Equal(t, `{"status":"ok","result":true}`, string(<-otherDone))
	<-refilled
	_, overlaps := sup.state()
	assert.Empty(t, overlaps, "a sandbox was prepared while a job ran")
	ev := log.list()
	require.Equal(t, []string{"prepare", "exec", "destroy", "other-exec", "other-end", "prepare"}, ev)

	t.Run("after the response is written", func(t *testing.T) {
		gate := make(chan struct{})
		sup.mu.Lock()
		sup.gate = gate
		sup.mu.Unlock()
		srv, sock, done := serveOn(t, q)
		c, err := net.Dial("unix", sock)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		_, err = io.WriteString(c, curlRequest("o/r", boolS, script))
		require.NoError(t, err)
		// The refill's prepare is held at the gate: the answer must
		// arrive whole all the same.
		resp, err := io.ReadAll(c)
		require.NoError(t, err)
		assert.Equal(t, okResponse(`{"status":"ok","result":true}`), string(resp))
		c.Close()
		// The refill is now held at the gate, mid-prepare.
		require.Eventually(t, func() bool { made, _ := sup.state(); return len(made) == 3 }, 10*time.Second, 5*time.Millisecond)
		// Shutdown waits for requests, not for the refill: it is done
		// at once (a 100 ms settle would otherwise report a kill).
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(sctx))
		assert.NoError(t, <-done)
		// Close waits for the refill's prepare before destroying.
		closed := make(chan error, 1)
		go func() { closed <- q.Close(ctx) }()
		waiting(t, closed, "Close, while a refill was preparing,")
		close(gate)
		require.NoError(t, <-closed)
		made, overlaps := sup.state()
		assert.Empty(t, overlaps)
		require.Len(t, made, 3)
		for _, sb := range made {
			assert.True(t, sb.destroyed, "sandbox %d outlived Close", sb.n)
		}
		assert.Equal(t, 1, q.pool.Stats().Destroyed, "the refilled one was idle at Close")
	})
}

// TestServerRefillsBeforeTheNextJob: through the server, the lane the job
// held is kept through the response and the refill, so back-to-back
// requests each find a prepared sandbox.
func TestServerRefillsBeforeTheNextJob(t *testing.T) {
	log := &eventLog{clock: &fakeClock{}}
	sup := &pooledSandboxes{log: log}
	q, _, _ := pooledBroker(t, 1, sup, NewMonotonicClock(), nil, nil, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "public"})
	ctx := context.Background()
	require.NoError(t, q.FillPool(ctx))
	srv, sock, done := serveOn(t, q)
	ts := &testServer{sock: sock}
	for i := 0; i < 4; i++ {
		assert.Equal(t, okResponse(`{"status":"ok","result":true}`), ts.raw(t, curlRequest("o/r", boolS, script)), "request %d", i)
	}
	// A request for a repository that is not configured queues for the
	// lane like any other: once it is answered, the last refill is done.
	assert.Equal(t, okResponse(errBody), ts.raw(t, curlRequest("o/none", boolS, script)))
	st := q.pool.Stats()
	assert.Equal(t, 4, st.Warm)
	assert.Zero(t, st.Cold, "a request reached the lane before the refill")
	assert.Equal(t, 1, st.Idle)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.NoError(t, srv.Shutdown(sctx))
	assert.NoError(t, <-done)
	require.NoError(t, q.Close(ctx))
	_, overlaps := sup.state()
	assert.Empty(t, overlaps)
}

// threeSeeds are the seeds of the first-fill tests, in fill order.
var threeSeeds = []Seed{
	{Repo: "o/a", Dir: "/seeds/a", Sensitivity: "public"},
	{Repo: "o/b", Dir: "/seeds/b", Sensitivity: "public"},
	{Repo: "o/c", Dir: "/seeds/c", Sensitivity: "public"},
}

// repos is the seed of each sandbox made, in order.
func repos(made []pooledSandbox) []string {
	var out []string
	for _, sb := range made {
		out = append(out, sb.t.Repo)
	}
	return out
}

// TestFirstFillServesMeanwhile: the first fill runs while the server
// answers, one seed per hold of the lane. A request that arrives during
// the first seed's step waits for that step only, and takes the lane at
// the bucket of the step's own 20 ms (100 ms), never at its end; it runs
// cold for a seed the fill has not reached, its refill does not do the
// fill's work, and the fill then goes on to the other seeds and records
// pool-filled once all are done.
func TestFirstFillServesMeanwhile(t *testing.T) {
	clock := &fakeClock{}
	gate := make(chan struct{})
	sup := &pooledSandboxes{log: &eventLog{clock: clock}, clock: clock, gate: gate}
	b, _, dir := pooledBroker(t, 1, sup, clock, nil, nil, threeSeeds...)
	ctx := context.Background()
	filled := make(chan error, 1)
	go func() { filled <- b.FillPool(ctx) }()
	defer func() {
		// A step still at the gate (after a failure) may go on.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case gate <- struct{}{}:
				case <-stop:
					return
				}
			}
		}()
		require.NoError(t, b.Close(ctx))
		made, _ := sup.state()
		for _, sb := range made {
			assert.True(t, sb.destroyed, "sandbox %d outlived Close", sb.n)
		}
	}()
	// The first step prepares for o/a, held at the gate with the lane.
	require.Eventually(t, func() bool { made, _ := sup.state(); return len(made) == 1 }, 10*time.Second, time.Millisecond)

	srv, sock, done := serveOn(t, b)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(sctx))
		assert.NoError(t, <-done)
	}()
	ts := &testServer{sock: sock}
	answered := make(chan string, 1)
	go func() { answered <- ts.raw(t, curlRequest("o/c", boolS, script)) }()
	require.Eventually(t, func() bool { return b.Used() == 1 }, 10*time.Second, time.Millisecond)
	// Give the request time to queue on the lane behind the step.
	time.Sleep(100 * time.Millisecond)
	gate <- struct{}{} // o/a's step ends; the request is next on the lane
	gate <- struct{}{} // the request's own cold prepare, for o/c
	assert.Equal(t, okResponse(`{"status":"ok","result":true}`), <-answered)
	select {
	case err := <-filled:
		t.Fatalf("the first fill finished (%v) before the other seeds' steps", err)
	default:
	}
	// The next step (o/b's) may have begun its prepare by now.
	made, _ := sup.state()
	require.GreaterOrEqual(t, len(made), 2)
	require.Equal(t, []string{"/seeds/a", "/seeds/c"}, repos(made)[:2], "the request waited for one seed's step, and its refill prepared nothing")
	assert.Equal(t, 100*time.Millisecond, made[1].at, "the request took the lane at the step's bucket")
	assert.Equal(t, 1, made[1].jobs)
	assert.NotContains(t, poolAudit(t, dir), `"event":"pool-filled"`)

	gate <- struct{}{} // o/b's step
	gate <- struct{}{} // o/c's step
	require.NoError(t, <-filled)
	made, overlaps := sup.state()
	assert.Equal(t, []string{"/seeds/a", "/seeds/c", "/seeds/b", "/seeds/c"}, repos(made))
	// o/b and o/c were prepared by two steps, the second at the first's
	// bucket, not by the request's refill in one hold.
	assert.Equal(t, 100*time.Millisecond, made[3].at-made[2].at, "each seed's step holds the lane to its own bucket")
	assert.Empty(t, overlaps)
	st := b.pool.Stats()
	assert.Equal(t, 3, st.Idle)
	assert.Equal(t, 1, st.Cold, "the request for a seed not reached yet ran cold")
	assert.Zero(t, st.Warm)
	assert.Contains(t, poolAudit(t, dir), `"event":"pool-filled","detail":"idle=3 seeds=3 size=1 backend=fake"`)
}

// TestFirstFillNeverOverlapsAJob: the first fill waits for a job of
// another broker on the lane, and prepares nothing while it runs.
func TestFirstFillNeverOverlapsAJob(t *testing.T) {
	log := &eventLog{clock: &fakeClock{}}
	sup := &pooledSandboxes{log: log}
	lane := make(chan struct{}, 1)
	q, _, _ := pooledBroker(t, 1, sup, NewMonotonicClock(), nil, lane, threeSeeds[:2]...)
	other, started, release := blockingBroker(t, sup, lane, threeSeeds[0])
	ctx := context.Background()
	otherDone := make(chan []byte, 1)
	go func() { otherDone <- other.Handle(ctx, queryReq("o/a", boolS, script)) }()
	<-started
	filled := make(chan error, 1)
	go func() { filled <- q.FillPool(ctx) }()
	waiting(t, filled, "the first fill, while another broker's job ran,")
	close(release)
	assert.Equal(t, `{"status":"ok","result":true}`, string(<-otherDone))
	require.NoError(t, <-filled)
	made, overlaps := sup.state()
	assert.Empty(t, overlaps, "a sandbox was prepared while a job ran")
	assert.Equal(t, []string{"/seeds/a", "/seeds/b"}, repos(made))
	assert.Equal(t, []string{"other-exec", "other-end", "prepare", "prepare"}, log.list())
	require.NoError(t, q.Close(ctx))
}

// TestCloseDuringTheFirstFill: Close waits for the step under way (its
// prepare is not cut short), the fill goes no further, everything it
// prepared is destroyed, and no pool-filled record is written.
func TestCloseDuringTheFirstFill(t *testing.T) {
	gate := make(chan struct{})
	sup := &pooledSandboxes{log: &eventLog{clock: &fakeClock{}}, gate: gate}
	b, _, dir := pooledBroker(t, 1, sup, NewMonotonicClock(), nil, nil, threeSeeds...)
	ctx := context.Background()
	filled := make(chan error, 1)
	go func() { filled <- b.FillPool(ctx) }()
	gate <- struct{}{} // o/a's step
	// o/b's step is held at the gate, mid-prepare.
	require.Eventually(t, func() bool { made, _ := sup.state(); return len(made) == 2 }, 10*time.Second, time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- b.Close(ctx) }()
	waiting(t, closed, "Close, while the first fill was preparing,")
	gate <- struct{}{}
	require.NoError(t, <-closed)
	require.NoError(t, <-filled)
	made, _ := sup.state()
	assert.Equal(t, []string{"/seeds/a", "/seeds/b"}, repos(made), "the fill stops at Close")
	for _, sb := range made {
		assert.True(t, sb.destroyed, "sandbox %d outlived Close", sb.n)
	}
	assert.Zero(t, b.pool.Stats().Idle)
	a := poolAudit(t, dir)
	assert.NotContains(t, a, `"event":"pool-filled"`)
	assert.Contains(t, a, `"event":"pool-closed"`)
}
