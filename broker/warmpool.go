package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/pool"
)

// WarmPool is what a broker keeps prepared ahead of its requests:
// isolate/pool's sandboxes for queries and probes, or an EnclavePooler's
// enclaves for bounded agents; both keep them in a pool.Core. Every one is
// single-use and keyed by the whole template. Fill and FillFor must only
// run with the lane held (see isolate/pool).
type WarmPool interface {
	// Size is how many are kept per template.
	Size() int
	// Templates are the templates kept filled, in fill order, each once.
	Templates() []isolate.Template
	// Missing is how many Fill would prepare now (0 once closed), and
	// MissingFor how many FillFor would.
	Missing() int
	MissingFor(ts ...isolate.Template) int
	// Fill prepares what is missing, and FillFor what ts lack; a failed
	// prepare leaves its template short (the next request for it is
	// cold) and is returned.
	Fill(ctx context.Context) (int, error)
	FillFor(ctx context.Context, ts ...isolate.Template) (int, error)
	// Close destroys every idle one; later requests are cold.
	Close(ctx context.Context) error
	// Stats are the pool's counters.
	Stats() pool.Stats
	// Run runs a query's or probe's job in a sandbox from the pool.
	Run(ctx context.Context, s isolate.Spec) isolate.Outcome
}

// EnclavePooler is an EnclaveRunner that can keep enclaves prepared ahead
// of their invocations: for each of templates, size enclaves shaped as
// shape(template) says (everything of the invocation's Enclave but its
// InvocationID and Files), each with its own network. Its RunEnclave takes
// a prepared enclave whose template and shape are exactly the
// invocation's, else runs one cold. The pool's Run runs no query: an
// enclave is never a query sandbox.
type EnclavePooler interface {
	EnclaveRunner
	EnclavePool(size int, templates []isolate.Template, shape func(isolate.Template) Enclave) (WarmPool, error)
}

// newPool builds the broker's warm pool of o.WarmPool per seed: query and
// probe sandboxes from isolate/pool, or, for bounded agents, enclaves from
// a runtime that is an EnclavePooler (another runtime is refused: the
// caller chooses 0 for a backend that prepares no enclave ahead).
func (b *Broker) newPool() error {
	o := b.o
	if o.WarmPool == 0 {
		return nil
	}
	ts := make([]isolate.Template, 0, len(o.Seeds))
	for _, s := range o.Seeds {
		ts = append(ts, b.template(b.seeds[strings.ToLower(s.Repo)]))
	}
	k, agent := o.Kind.(*AgentKind)
	if !agent {
		p, err := pool.New(o.Runtime, o.WarmPool, ts)
		if err != nil {
			return err
		}
		b.pool = newReachedPool(p)
		return nil
	}
	ep, ok := o.Runtime.(EnclavePooler)
	if !ok {
		return fmt.Errorf("runtime %s prepares no enclave ahead: warm pool %d must be 0", o.Runtime.Name(), o.WarmPool)
	}
	p, err := ep.EnclavePool(o.WarmPool, ts, func(t isolate.Template) Enclave { return k.shape("", t.Repo) })
	if err != nil {
		return err
	}
	b.pool = newReachedPool(p)
	return nil
}

// reachedPool is the broker's view of its warm pool: Fill and Missing
// cover only the templates that FillFor has reached, so that a refill
// after a response refills what requests took and never does the first
// fill's work for a seed that fill has not reached yet (FillPool does it,
// one seed per hold of the lane). Everything else is the pool's own.
type reachedPool struct {
	WarmPool
	mu      sync.Mutex
	reached []isolate.Template // guarded by mu
}

func newReachedPool(p WarmPool) *reachedPool { return &reachedPool{WarmPool: p} }

// FillFor marks ts reached, then fills them.
func (p *reachedPool) FillFor(ctx context.Context, ts ...isolate.Template) (int, error) {
	p.mu.Lock()
	for _, t := range ts {
		if !slices.Contains(p.reached, t) {
			p.reached = append(p.reached, t)
		}
	}
	p.mu.Unlock()
	return p.WarmPool.FillFor(ctx, ts...)
}

// Fill fills the reached templates.
func (p *reachedPool) Fill(ctx context.Context) (int, error) {
	return p.WarmPool.FillFor(ctx, p.reachedOnes()...)
}

// Missing is what the reached templates lack.
func (p *reachedPool) Missing() int { return p.WarmPool.MissingFor(p.reachedOnes()...) }

func (p *reachedPool) reachedOnes() []isolate.Template {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reached)
}

// Deadlines of the warm pool's work. None of it is inside a request's
// measured window.
const (
	// RefillTimeout bounds one fill on the lane: a refill after a
	// response, or one seed's step of the first fill.
	RefillTimeout = 2 * time.Minute
	// PoolCloseTimeout bounds destroying the idle sandboxes at shutdown.
	PoolCloseTimeout = 30 * time.Second
)

// The warm pool's lifecycle events in the audit log.
const (
	LifecyclePoolFilled     = "pool-filled"
	LifecyclePoolFillFailed = "pool-fill-failed"
	LifecyclePoolClosed     = "pool-closed"
	LifecyclePoolCloseError = "pool-close-failed"
)

// FillPool fills the warm pool for the first time, one template (one
// seed) at a time: each step takes the lane, prepares what that template
// lacks and keeps the lane until the timing bucket of the step's own
// duration has passed, exactly as a refill does (fillAndRelease). So the
// fill never overlaps a job, and a request that queues behind a step
// waits for one seed's fill at most and learns only its bucket, never its
// duration. A request for a seed the fill has not reached yet waits on
// the lane or runs cold; until the fill reaches a seed, no refill
// prepares for it (reachedPool). It does not delay readiness: the server
// answers meanwhile, and the host calls it on a goroutine of its own once
// the broker reports ready.
//
// Once every template had its step it writes the pool-filled lifecycle
// record: how many sandboxes wait, for how many seeds. That count is the
// pool's cost: each idle sandbox holds what a prepared one holds (for the
// direct runtime its waiting init process, cgroup, tmpfs and mounts). A
// failed prepare is recorded and returned; the broker still serves, and
// that seed's requests prepare their sandboxes cold. It stops early,
// without the record, when ctx ends, on Freeze, or on Close (which waits
// for the step under way). Without a pool it does nothing.
func (b *Broker) FillPool(ctx context.Context) error {
	if b.pool == nil {
		return nil
	}
	b.mu.Lock()
	if b.poolClosed {
		b.mu.Unlock()
		return nil
	}
	b.refills.Add(1)
	b.mu.Unlock()
	defer b.refills.Done()
	var errs []error
	for _, t := range b.pool.Templates() {
		if !b.takeLane(ctx) {
			return errors.Join(errs...)
		}
		// No missing: a step runs even for a template that lacks nothing,
		// since its FillFor is what marks the template reached.
		if err := b.fillAndRelease(ctx, nil, func(ctx context.Context) (int, error) { return b.pool.FillFor(ctx, t) }); err != nil {
			errs = append(errs, err)
		}
	}
	b.mu.Lock()
	closed := b.poolClosed || b.closed.Load()
	b.mu.Unlock()
	if closed {
		return errors.Join(errs...)
	}
	st := b.pool.Stats()
	b.o.Audit.Lifecycle(LifecyclePoolFilled, fmt.Sprintf("idle=%d seeds=%d size=%d backend=%s", st.Idle, len(b.seeds), b.pool.Size(), b.o.Runtime.Name()))
	return errors.Join(errs...)
}

// takeLane waits for the lane for a fill: false when ctx ends or the
// broker is frozen or closed first.
func (b *Broker) takeLane(ctx context.Context) bool {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.stopped, cancel)()
	select {
	case b.lane <- struct{}{}:
		return true
	case <-hctx.Done():
		return false
	}
}

// Refill prepares what the warm pool lacks, for a caller that answers
// through Handle rather than the server (the server refills on the lane
// its job held, after writing the response; the agent is thawed by then).
// It takes the lane, so it never runs beside a job of any broker of the
// run, and it keeps the lane until the timing bucket of its own duration
// has passed: a request that queues behind it learns which bucket the refill
// took, never how long it took, so that the refill's duration cannot carry
// what a finished sandbox left in the kernel. It returns at once when
// there is no pool or nothing is missing, and stops holding the lane on
// Freeze. A failed prepare is audited; that seed's next request is cold.
func (b *Broker) Refill(ctx context.Context) {
	if b.pool == nil || b.pool.Missing() == 0 || b.closed.Load() {
		return
	}
	if b.takeLane(ctx) {
		b.refillAndRelease(ctx)
	}
}

// refillAndRelease is Refill with the lane already held (by the request
// whose response has just been written, or by Refill); it releases the
// lane when done. The server calls it after writing a response that
// handle answered with the lane held, so that the next job on the lane
// finds the pool full.
func (b *Broker) refillAndRelease(ctx context.Context) {
	_ = b.fillAndRelease(ctx, b.pool.Missing, b.pool.Fill)
}

// fillAndRelease runs fill with the lane already held, unless the pool
// is closed, the broker frozen, or missing (when not nil) says there is
// nothing to prepare; then it keeps the lane until the bucket of the
// fill's own duration has passed (not on Freeze), and releases it. A
// failed fill is audited and returned.
func (b *Broker) fillAndRelease(ctx context.Context, missing func() int, fill func(context.Context) (int, error)) error {
	defer func() { <-b.lane }()
	b.mu.Lock()
	if b.poolClosed || b.closed.Load() || (missing != nil && missing() == 0) {
		b.mu.Unlock()
		return nil
	}
	b.refills.Add(1)
	b.mu.Unlock()
	defer b.refills.Done()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.stopped, cancel)()
	clock := b.o.Clock
	start := clock.Now()
	// A shutdown (Freeze, Close) cuts the prepare short: the runtime's
	// Prepare removes what it made when its context ends, as after any
	// failed prepare, so a shutdown never waits for a boot (a gvisor
	// sandbox's takes seconds on a loaded host) and a run torn down after
	// a fault leaves nothing within its bound. Otherwise the prepare has
	// its own deadline, not the request's.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), RefillTimeout)
	stopFill := context.AfterFunc(b.stopped, fcancel)
	_, err := fill(fctx)
	stopFill()
	fcancel()
	elapsed := clock.Now() - start
	if err != nil && b.stopped.Err() == nil {
		b.o.Audit.Lifecycle(LifecyclePoolFillFailed, err.Error())
	}
	Prioritized(func() { WaitForBucket(hctx, clock, start, elapsed) })
	return err
}

// Close cuts short a refill or a step of the first fill under way and
// waits for it to end (its prepare removes what it made; the first fill
// takes no further step),
// destroys the warm pool's idle sandboxes, all under PoolCloseTimeout even
// when ctx has ended, and records the pool's counters: warm and cold
// takes, and how many idle sandboxes it destroyed. Call it once the
// server has shut down and before the runtime's last sweep; a later
// request's sandbox is prepared cold. A failed destroy is recorded and
// returned (the runtime marks itself unusable). Without a pool it does
// nothing.
func (b *Broker) Close(ctx context.Context) error {
	if b.pool == nil {
		return nil
	}
	b.mu.Lock()
	b.poolClosed = true
	b.mu.Unlock()
	b.stop() // a refill's prepare and its hold of the lane end now
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PoolCloseTimeout)
	defer cancel()
	done := make(chan struct{})
	go func() { b.refills.Wait(); close(done) }()
	select {
	case <-done:
	case <-cctx.Done():
		// The pool is closed below; a fill that returns later destroys
		// what it prepared itself.
	}
	err := b.pool.Close(cctx)
	st := b.pool.Stats()
	b.o.Audit.Lifecycle(LifecyclePoolClosed, fmt.Sprintf("warm=%d cold=%d prepared=%d failed=%d destroyed=%d", st.Warm, st.Cold, st.Prepared, st.Failed, st.Destroyed))
	if err != nil {
		b.o.Audit.Lifecycle(LifecyclePoolCloseError, err.Error())
	}
	return err
}
