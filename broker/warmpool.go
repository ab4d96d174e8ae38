package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/pool"
)

// WarmPool is what a broker keeps prepared ahead of its requests:
// isolate/pool's sandboxes for queries and probes, or an EnclavePooler's
// enclaves for bounded agents. Every one is single-use and keyed by the
// whole template. Fill must only run with the lane held (see isolate/pool).
type WarmPool interface {
	// Size is how many are kept per template.
	Size() int
	// Missing is how many Fill would prepare now (0 once closed).
	Missing() int
	// Fill prepares what is missing; a failed prepare leaves its template
	// short (the next request for it is cold) and is returned.
	Fill(ctx context.Context) (int, error)
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
		b.pool = p
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
	b.pool = p
	return nil
}

// Deadlines of the warm pool's work. None of it is inside a request's
// measured window.
const (
	// PoolFillTimeout bounds the start-up fill of every seed's sandboxes.
	PoolFillTimeout = 10 * time.Minute
	// RefillTimeout bounds one refill after a response.
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

// FillPool prepares the warm pool's sandboxes before the first request, on
// the lane, and writes the pool-filled lifecycle record: how many
// sandboxes wait, for how many seeds. That count is the pool's cost: each
// idle sandbox holds what a prepared one holds (for the direct runtime its
// waiting init process, cgroup, tmpfs and mounts). A failed prepare is
// recorded and returned; the broker still serves, and that seed's requests
// prepare their sandboxes cold. Without a pool it does nothing.
func (b *Broker) FillPool(ctx context.Context) error {
	if b.pool == nil {
		return nil
	}
	select {
	case b.lane <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.lane }()
	fctx, cancel := context.WithTimeout(ctx, PoolFillTimeout)
	defer cancel()
	_, err := b.pool.Fill(fctx)
	st := b.pool.Stats()
	b.o.Audit.Lifecycle(LifecyclePoolFilled, fmt.Sprintf("idle=%d seeds=%d size=%d backend=%s", st.Idle, len(b.seeds), b.pool.Size(), b.o.Runtime.Name()))
	if err != nil {
		b.o.Audit.Lifecycle(LifecyclePoolFillFailed, err.Error())
	}
	return err
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
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.stopped, cancel)()
	select {
	case b.lane <- struct{}{}:
	case <-hctx.Done():
		return
	}
	b.refillAndRelease(ctx)
}

// refillAndRelease is Refill with the lane already held (by the request
// whose response has just been written, or by Refill); it releases the
// lane when done. The server calls it after writing a response that
// handle answered with the lane held, so that the next job on the lane
// finds the pool full.
func (b *Broker) refillAndRelease(ctx context.Context) {
	defer func() { <-b.lane }()
	b.mu.Lock()
	if b.poolClosed || b.pool.Missing() == 0 || b.closed.Load() {
		b.mu.Unlock()
		return
	}
	b.refills.Add(1)
	b.mu.Unlock()
	defer b.refills.Done()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.stopped, cancel)()
	clock := b.o.Clock
	start := clock.Now()
	// A prepare is not cut short by a shutdown: an abandoned one can leave
	// the runtime unusable. It has its own deadline.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), RefillTimeout)
	_, err := b.pool.Fill(fctx)
	fcancel()
	elapsed := clock.Now() - start
	if err != nil {
		b.o.Audit.Lifecycle(LifecyclePoolFillFailed, err.Error())
	}
	Prioritized(func() { WaitForBucket(hctx, clock, start, elapsed) })
}

// Close waits for a refill under way (its prepare is not cut short),
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
	b.stop() // a refill's hold of the lane ends now
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
