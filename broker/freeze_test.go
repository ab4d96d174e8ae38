package broker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eventLog records the pipeline's steps in order, with the fake clock's
// time of each.
type eventLog struct {
	mu     sync.Mutex
	clock  *fakeClock
	events []string
	at     map[string]time.Duration
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	if l.at == nil {
		l.at = map[string]time.Duration{}
	}
	l.at[e] = l.clock.Now()
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// loggingClock is the fake clock with every bucket sleep recorded.
type loggingClock struct {
	*fakeClock
	log *eventLog
}

func (c loggingClock) Sleep(ctx context.Context, d time.Duration) {
	c.fakeClock.Sleep(ctx, d)
	c.log.add("bucket")
}

// fakeFreezer records freezes and thaws. freeze runs inside Freeze (cost,
// failure, blocking); thawErr fails every Thaw.
type fakeFreezer struct {
	log        *eventLog
	cost       time.Duration
	freeze     func(ctx context.Context) error
	thawErr    error
	debitSeen  func() int64 // the repo's balance when Freeze is called
	balanceAt  int64
	thawCtxErr error // ctx.Err() that Thaw saw
}

func (f *fakeFreezer) Freeze(ctx context.Context) error {
	f.balanceAt = f.debitSeen()
	f.log.clock.advance(f.cost)
	f.log.add("freeze")
	if f.freeze != nil {
		return f.freeze(ctx)
	}
	return nil
}

func (f *fakeFreezer) Thaw(ctx context.Context) error {
	f.thawCtxErr = ctx.Err()
	f.log.add("thaw")
	return f.thawErr
}

// TestFreezeAroundMeteredQueries checks the order debit, freeze, run,
// bucket, thaw, respond for metered repositories, no freeze for public
// ones, and that every failure fails closed with the agent thawed again.
func TestFreezeAroundMeteredQueries(t *testing.T) {
	boom := errors.New("freezer.state: permission denied")
	cases := []struct {
		name        string
		sensitivity string
		freezeCost  time.Duration
		freeze      func(context.Context) error
		thawErr     error
		outcome     func(cancel context.CancelFunc) func(isolate.Spec) isolate.Outcome
		want        []string
		body        string
		reason      string
		runs        int
		answeredAt  time.Duration // the fake clock when the response is returned
	}{
		{name: "internal", sensitivity: "internal", want: []string{"freeze", "run", "bucket", "thaw"},
			body: `{"status":"ok","result":true}`, runs: 1, answeredAt: 100 * time.Millisecond},
		{name: "confidential", sensitivity: "confidential", want: []string{"freeze", "run", "bucket", "thaw"},
			body: `{"status":"ok","result":true}`, runs: 1, answeredAt: 100 * time.Millisecond},
		{name: "freeze time is inside the bucket", sensitivity: "internal", freezeCost: 70 * time.Millisecond,
			want: []string{"freeze", "run", "bucket", "thaw"}, body: `{"status":"ok","result":true}`, runs: 1, answeredAt: time.Second},
		{name: "public does not freeze", sensitivity: "public", want: []string{"run", "bucket"},
			body: `{"status":"ok","result":true}`, runs: 1, answeredAt: 100 * time.Millisecond},
		{name: "freeze fails", sensitivity: "confidential", freeze: func(context.Context) error { return boom },
			want: []string{"freeze", "bucket", "thaw"}, body: errBody, reason: ReasonAgentFreezeFailed, answeredAt: 10 * time.Millisecond},
		{name: "freeze times out", sensitivity: "internal",
			freeze: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			want:   []string{"freeze", "bucket", "thaw"}, body: errBody, reason: ReasonAgentFreezeFailed, answeredAt: 10 * time.Millisecond},
		{name: "thaw fails", sensitivity: "internal", thawErr: boom,
			want: []string{"freeze", "run", "bucket", "thaw"}, body: errBody, reason: ReasonAgentThawFailed, runs: 1, answeredAt: 100 * time.Millisecond},
		{name: "sandbox panics", sensitivity: "internal",
			outcome: func(context.CancelFunc) func(isolate.Spec) isolate.Outcome {
				return func(isolate.Spec) isolate.Outcome { panic("runtime bug") }
			},
			want: []string{"freeze", "run", "thaw"}, body: errBody, reason: ReasonUnexpected, runs: 1, answeredAt: 40 * time.Millisecond},
		{name: "shutdown during the query", sensitivity: "internal",
			outcome: func(cancel context.CancelFunc) func(isolate.Spec) isolate.Outcome {
				return func(isolate.Spec) isolate.Outcome {
					cancel()
					return isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}
				}
			},
			want: []string{"freeze", "run", "bucket", "thaw"}, body: errBody, reason: ReasonUnexpected, runs: 1, answeredAt: 100 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := testAudit(t, dir, "bounded-query.jsonl")
			clock := &fakeClock{}
			log := &eventLog{clock: clock}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt := &fakeRuntime{clock: clock, cost: 40 * time.Millisecond}
			rt.outcome = func(s isolate.Spec) isolate.Outcome {
				log.add("run")
				if tc.outcome != nil {
					return tc.outcome(cancel)(s)
				}
				return isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}
			}
			fr := &fakeFreezer{log: log, cost: tc.freezeCost, freeze: tc.freeze, thawErr: tc.thawErr}
			b, err := New(Options{Kind: QueryKind{}, Runtime: rt, Template: testTemplate(),
				Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: tc.sensitivity}}, MaxInvocations: 8, Timeout: 30 * time.Second,
				Clock: loggingClock{clock, log}, Audit: a, Freezer: fr, FreezeTimeout: 20 * time.Millisecond})
			require.NoError(t, err)
			fr.debitSeen = func() int64 { return b.Ledger().Balance("o/r") }

			body := b.Handle(ctx, queryReq("o/r", boolS, script))
			log.add("respond")

			assert.Equal(t, tc.body, string(body))
			assert.Equal(t, append(tc.want, "respond"), log.list())
			assert.Equal(t, tc.runs, rt.runs(), "sandbox runs")
			assert.Equal(t, tc.answeredAt, log.at["respond"], "answered at")
			full, _, _ := proto.SensitivityBudget(tc.sensitivity)
			if slices.Contains(tc.want, "freeze") {
				assert.Equal(t, full-5, fr.balanceAt, "the charge is debited before the freeze")
				assert.NoError(t, fr.thawCtxErr, "thaw gets its own deadline even after shutdown")
			}
			if slices.Contains(tc.want, "bucket") && slices.Contains(tc.want, "thaw") {
				assert.GreaterOrEqual(t, log.at["thaw"], log.at["bucket"], "thawed only after the bucket")
			}
			audit := auditText(t, dir, "bounded-query.jsonl")
			if tc.reason != "" {
				assert.Contains(t, audit, `"reason":"`+tc.reason+`"`)
			}
			if tc.reason == ReasonAgentFreezeFailed {
				assert.Equal(t, full-5, b.Ledger().Balance("o/r"), "a failed freeze refunds nothing")
			}
		})
	}
}
