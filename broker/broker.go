package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// Seed is one staged repository as the broker knows it.
type Seed struct {
	Repo        string // lower-cased slug
	Dir         string // read-only seed directory
	Sensitivity string
}

// MaxInvocationsCap is the largest maxInvocations the broker accepts.
const MaxInvocationsCap = 10000

// Options configure a Broker.
type Options struct {
	Kind    JobKind
	Runtime isolate.Runtime
	// Template is the sandbox template; Repo is filled in per request.
	Template isolate.Template
	Seeds    []Seed
	// MaxInvocations caps the requests of one run.
	MaxInvocations int
	// Timeout is the per-job wall-clock limit (at most 540 s).
	Timeout time.Duration
	// Clock defaults to the real monotonic clock.
	Clock     Clock
	Audit     *Audit
	Telemetry *TelemetryLog
	// Freezer stops the agent's whole process tree while a query against a
	// metered repository runs; nil means there is no agent to freeze (tests,
	// operator tools). awf run always sets it.
	Freezer Freezer
	// FreezeTimeout bounds one Freeze (0 = DefaultFreezeTimeout); ThawTimeout
	// bounds one Thaw (0 = DefaultThawTimeout).
	FreezeTimeout, ThawTimeout time.Duration
	// Lane, when set, is a one-slot channel shared with the run's other
	// brokers (sealed probes beside bounded queries), so that at most one
	// sandbox of any kind runs at a time and none can signal to a
	// concurrent one. Nil gives the broker a lane of its own.
	Lane chan struct{}
	// WarmPool is how many single-use sandboxes the broker keeps prepared
	// for each seed (isolate/pool), so that a request pays for running its
	// job and destroying the sandbox but not for preparing it. 0 keeps
	// none: every sandbox is prepared inside its request, as without a
	// pool. A bounded-agent broker keeps enclaves (network and sandbox)
	// prepared instead, from its runtime's EnclavePool. The pool is filled
	// by FillPool and refilled after each response, on the lane, and
	// emptied by Close.
	WarmPool int
}

// Freezer freezes and thaws the agent. Freeze returns nil only once the
// kernel reports every agent process frozen; Thaw returns once it reports
// them thawed. Both honour ctx's deadline.
type Freezer interface {
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
}

// Default freeze and thaw deadlines. A freeze that is not done in time fails
// the query closed: the sandbox does not run and the agent is thawed.
const (
	DefaultFreezeTimeout = 2 * time.Second
	DefaultThawTimeout   = 5 * time.Second
)

// Broker runs jobs of one kind, one at a time, and answers canonically.
type Broker struct {
	o      Options
	seeds  map[string]Seed
	ledger *Ledger
	lane   chan struct{}
	// errBody and route are the kind's (KindErrorBody, KindRoute).
	errBody []byte
	route   string
	// pool holds the prepared sandboxes (or enclaves); nil when WarmPool
	// is 0.
	pool WarmPool
	// stopped ends when Freeze is called: a refill stops holding the lane.
	stopped context.Context
	stop    context.CancelFunc
	// refills are the Refill calls under way; Close waits for them. A
	// refill registers under mu and only while poolClosed is false.
	refills    sync.WaitGroup
	poolClosed bool // guarded by mu

	mu     sync.Mutex
	used   int
	closed atomic.Bool
	active sync.WaitGroup
}

// New returns a broker.
func New(o Options) (*Broker, error) {
	if o.Kind == nil || o.Runtime == nil {
		return nil, fmt.Errorf("broker: kind and runtime are required")
	}
	if o.MaxInvocations < 1 || o.MaxInvocations > MaxInvocationsCap {
		return nil, fmt.Errorf("broker: maxInvocations %d must be in 1..%d", o.MaxInvocations, MaxInvocationsCap)
	}
	if o.Timeout <= 0 || o.Timeout > proto.MaxQueryTimeoutSeconds*time.Second {
		return nil, fmt.Errorf("broker: timeout %v must be in (0, %ds]", o.Timeout, proto.MaxQueryTimeoutSeconds)
	}
	if o.Clock == nil {
		o.Clock = NewMonotonicClock()
	}
	if o.FreezeTimeout <= 0 {
		o.FreezeTimeout = DefaultFreezeTimeout
	}
	if o.ThawTimeout <= 0 {
		o.ThawTimeout = DefaultThawTimeout
	}
	if o.WarmPool < 0 {
		return nil, fmt.Errorf("broker: warm pool size %d must not be negative", o.WarmPool)
	}
	lane := o.Lane
	if lane == nil {
		lane = make(chan struct{}, 1)
	} else if cap(lane) != 1 {
		return nil, fmt.Errorf("broker: a shared lane must have exactly one slot")
	}
	b := &Broker{o: o, seeds: map[string]Seed{}, lane: lane, errBody: KindErrorBody(o.Kind), route: KindRoute(o.Kind)}
	sens := map[string]string{}
	for _, s := range o.Seeds {
		key := strings.ToLower(s.Repo)
		if _, dup := b.seeds[key]; dup {
			return nil, fmt.Errorf("broker: repository %s is configured twice", key)
		}
		b.seeds[key] = s
		sens[key] = s.Sensitivity
	}
	b.ledger = NewLedger(sens)
	b.stopped, b.stop = context.WithCancel(context.Background())
	if err := b.newPool(); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return b, nil
}

// template is the sandbox template of a job against seed: the one that
// run gives the runtime and that the warm pool is keyed and filled by.
func (b *Broker) template(seed Seed) isolate.Template {
	t := b.o.Template
	t.Repo = seed.Dir
	t.Limits.Wall = b.o.Timeout
	return t
}

// Ledger exposes the ledger to the operator side (tests, summaries).
func (b *Broker) Ledger() *Ledger { return b.ledger }

// Freeze stops admissions: every later request gets the canonical error
// without being counted. A refill stops holding the lane, and none starts.
func (b *Broker) Freeze() {
	b.closed.Store(true)
	b.stop()
}

// Wait waits for admitted requests to finish, or for ctx.
func (b *Broker) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { b.active.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errorBody = []byte(proto.ErrorEnvelope)

// Handle answers one request that reached the route. The returned body is
// always one of the two canonical strings.
func (b *Broker) Handle(ctx context.Context, r *Request) []byte {
	body, _ := b.handle(ctx, r, false)
	return body
}

// handle is Handle. With keep set and a warm pool it may return with the
// lane still held (held true): the server then writes the response and
// calls refillAndRelease, so that the refill follows the response before
// any other job can take the lane. Without a pool the lane is always
// released on return, as without keep.
func (b *Broker) handle(ctx context.Context, r *Request, keep bool) (body []byte, held bool) {
	if b.closed.Load() {
		return b.errBody, false
	}
	b.mu.Lock()
	if b.used >= b.o.MaxInvocations {
		b.mu.Unlock()
		b.o.Audit.Failure(IDBudget, ReasonCountExhausted, fmt.Sprintf("maxInvocations=%d", b.o.MaxInvocations))
		b.emit(ReasonCountExhausted)
		return b.errBody, false
	}
	b.used++
	b.active.Add(1)
	b.mu.Unlock()
	defer b.active.Done()

	select {
	case b.lane <- struct{}{}:
	case <-ctx.Done():
		b.o.Audit.Failure(IDQueue, ReasonUnexpected, "request abandoned while queued")
		return b.errBody, false
	}
	held = keep && b.pool != nil
	defer func() {
		if !held {
			<-b.lane
		}
	}()
	body, err := b.execute(ctx, r)
	if err != nil {
		b.o.Audit.Failure(IDQueue, ReasonUnexpected, err.Error())
		return b.errBody, held
	}
	return body, held
}

// emit writes the telemetry record of one answered job of the broker's
// kind: every kind shares it, with the kind's class (KindClass).
func (b *Broker) emit(category string) {
	b.o.Telemetry.Emit(KindClass(b.o.Kind), StateSupported, category)
}

// Used returns how many requests have been counted.
func (b *Broker) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func newInvocationID() string {
	var r [12]byte
	if _, err := rand.Read(r[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(r[:])
}

// execute runs one counted request through the pipeline on the lane.
func (b *Broker) execute(ctx context.Context, r *Request) (body []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			body, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	id := newInvocationID()
	a := b.o.Audit

	task, reason, ferr := frame(b.o.Kind, r)
	if ferr != nil {
		if reason != ReasonInvalidRequest {
			a.Failure(IDFraming, reason, ferr.Error())
		}
		a.Failure(id, ReasonInvalidRequest, ferr.Error())
		b.emit(ReasonInvalidRequest)
		return b.errBody, nil
	}
	key := strings.ToLower(task.Repo())
	seed, ok := b.seeds[key]
	if !ok {
		a.Failure(id, ReasonRepoNotAllowed, "repo="+key)
		b.emit(ReasonRepoNotAllowed)
		return b.errBody, nil
	}
	charge := task.ChargeBits()
	if !b.ledger.TryDebit(key, charge) {
		a.Failure(id, ReasonBudgetExhausted, fmt.Sprintf("repo=%s charge=%d", key, charge))
		b.emit(ReasonBudgetExhausted)
		return b.errBody, nil
	}

	// The clock starts after the debit. Everything until the sandbox and its
	// workspace are gone is inside the measurement, and so are the agent's
	// freeze and thaw: the agent is frozen from here until the bucket has
	// passed, so it sees neither the sandbox nor when the sandbox ended.
	clock := b.o.Clock
	start := clock.Now()
	ag := b.freezeAgent(ctx, seed)
	defer ag.thaw() // on every path, panics included; a no-op once thawed
	var outcome, detail string
	var result []byte
	if ag.err != nil {
		reason, detail = ReasonAgentFreezeFailed, ag.err.Error()
	} else {
		reason, outcome, detail, result = b.run(ctx, id, seed, task)
	}
	elapsed := clock.Now() - start
	var bucket time.Duration
	var inTime bool
	Prioritized(func() { bucket, inTime = WaitForBucket(ctx, clock, start, elapsed) })
	if !inTime {
		if ctx.Err() != nil {
			reason, detail = ReasonUnexpected, "shutdown while waiting for the timing bucket"
		} else {
			reason, detail = ReasonBucketOverflow, fmt.Sprintf("elapsed=%dms", elapsed.Milliseconds())
		}
		result = nil
	}
	if err := ag.thaw(); err != nil && reason == "" {
		reason, detail, result = ReasonAgentThawFailed, err.Error(), nil
	}
	bits := charge
	el := elapsed.Milliseconds()
	rec := Record{InvocationID: id, Repo: key, Sensitivity: seed.Sensitivity, Bits: &bits, Outcome: outcome, ElapsedMs: &el}
	rec.ScriptSHA256, rec.SchemaSHA256 = taskDigests(task)
	if inTime {
		ms := bucket.Milliseconds()
		rec.BucketMs = &ms
	}
	if reason == "" {
		rec.Kind = "invocation"
		rec.Outcome = ""
		a.Write(rec)
		b.emit("success")
		return result, nil
	}
	rec.Kind, rec.Reason, rec.Detail = "failure", reason, detail
	a.Write(rec)
	b.emit(reason)
	return b.errBody, nil
}

// frozenAgent is the agent's freeze for one request. thaw undoes it once.
type frozenAgent struct {
	b      *Broker
	ctx    context.Context
	err    error // the freeze failed: the sandbox must not run
	frozen bool  // Freeze was called and thaw has not run yet
}

// freezeAgent freezes the agent for a request against a metered repository
// (any sensitivity but public: an unknown one counts as metered).
func (b *Broker) freezeAgent(ctx context.Context, seed Seed) *frozenAgent {
	f := &frozenAgent{b: b, ctx: ctx}
	if b.o.Freezer == nil {
		return f
	}
	if _, metered, known := proto.SensitivityBudget(seed.Sensitivity); known && !metered {
		return f
	}
	fctx, cancel := context.WithTimeout(ctx, b.o.FreezeTimeout)
	defer cancel()
	// Even a failed or timed-out freeze may have stopped part of the tree.
	f.frozen = true
	if err := b.o.Freezer.Freeze(fctx); err != nil {
		f.err = fmt.Errorf("freeze the agent: %w", err)
	}
	return f
}

// thaw thaws the agent if freezeAgent froze it, under its own deadline even
// when the request's context has ended (shutdown).
func (f *frozenAgent) thaw() error {
	if !f.frozen {
		return nil
	}
	f.frozen = false
	tctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), f.b.o.ThawTimeout)
	defer cancel()
	if err := f.b.o.Freezer.Thaw(tctx); err != nil {
		f.b.o.Audit.Lifecycle("agent-thaw-failed", err.Error())
		return fmt.Errorf("thaw the agent: %w", err)
	}
	return nil
}

// run executes the job in a fresh sandbox and classifies the outcome. It
// returns an empty reason and the success body, or a failure reason.
func (b *Broker) run(ctx context.Context, id string, seed Seed, task Task) (reason, outcome, detail string, body []byte) {
	t := b.template(seed)
	// The runtime gets the job's wall limit plus a grace for setup and
	// teardown; isolate.RunWithSandbox bounds the destroy on its own.
	rctx, cancel := context.WithTimeout(ctx, b.o.Timeout+30*time.Second)
	defer cancel()
	o := b.runJob(rctx, t, id, task)
	detail = o.Detail
	switch o.Kind {
	case isolate.KindOK:
		res, err := task.Result(o.Output)
		if err != nil {
			return ReasonNonconformant, string(o.Kind), err.Error(), nil
		}
		return "", string(o.Kind), "", res
	case isolate.KindTimeout:
		return ReasonTimeout, string(o.Kind), detail, nil
	case isolate.KindNonzeroExit:
		return ReasonNonZeroExit, string(o.Kind), fmt.Sprintf("exit=%d %s", o.ExitCode, detail), nil
	case isolate.KindOutputMissing, isolate.KindOutputTooLarge, isolate.KindOutputInvalid:
		return ReasonUnreadableOutput, string(o.Kind), detail, nil
	case isolate.KindCleanupFailed:
		return ReasonCleanupFailed, string(o.Kind), detail, nil
	case isolate.KindLaunchFailed:
		return ReasonLaunchFailed, string(o.Kind), detail, nil
	case isolate.KindOOM, isolate.KindPidsLimit, isolate.KindFileSizeLimit, isolate.KindSeccompKill:
		return string(o.Kind), string(o.Kind), detail, nil
	default:
		return ReasonLaunchFailed, string(o.Kind), "unknown outcome kind: " + detail, nil
	}
}
