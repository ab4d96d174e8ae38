// Package pool keeps single-use sandboxes prepared ahead of their requests,
// for any isolate.Runtime, so that a request pays for Exec and Destroy only.
//
// A pool never reuses a sandbox. Take removes the sandbox it returns, and
// there is no way to give one back: whoever takes a sandbox runs at most one
// job in it and destroys it. A prepared sandbox has run nothing yet (no
// script, no job), so what it can carry to the job that takes it is what a
// cold Prepare would give that job.
//
// A pool does not decide when to refill. Fill and FillFor prepare
// sandboxes on the caller's goroutine, and the caller must call them only
// when no job runs beside them (the broker does so on its lane, after the
// response), so that a sandbox is never being prepared while a job could
// observe it. A pool does not hold an enclave (a template with a Network):
// an enclave's network belongs to one invocation.
//
// Core is the bookkeeping itself, over any prepared item: Pool is a Core
// of sandboxes, and the bounded-agent broker keeps its prepared enclaves
// (a network and a sandbox on it) in a Core of its own, under the same
// rules.
package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/awf-project/awf/isolate"
)

// Stats are a pool's counters since New.
type Stats struct {
	// Idle is how many prepared items wait now, over all templates.
	Idle int
	// Warm counts the takes served by a prepared item.
	Warm int
	// Cold counts the takes that found none (or none that fit) and
	// prepared one on the spot.
	Cold int
	// Prepared counts the items a fill prepared; Failed counts its
	// prepares that failed (not those its caller cut short).
	Prepared, Failed int
	// Destroyed counts the idle items destroyed unused: by Close (or
	// tried: its error says which failed), or by a take they did not fit.
	Destroyed int
}

// Pool holds up to Size prepared sandboxes per template: a Core of
// sandboxes from one runtime, whose takes prepare a cold one when none
// waits. The zero value is not usable; use New. Its methods are safe for
// concurrent use, but a fill must not run beside a job (see the package
// comment).
type Pool struct {
	*Core[isolate.Sandbox]
	rt isolate.Runtime
}

// New returns an empty pool that keeps size sandboxes prepared for each of
// templates. size must be at least 1 (no pool at all is the caller's
// choice of not building one); a template with a Network is refused.
func New(rt isolate.Runtime, size int, templates []isolate.Template) (*Pool, error) {
	if rt == nil {
		return nil, errors.New("pool: no runtime")
	}
	for _, t := range templates {
		if t.Network != nil {
			return nil, fmt.Errorf("pool: template for %s names a network: an enclave is never pooled", t.Repo)
		}
	}
	c, err := NewCore(size, templates, Items[isolate.Sandbox]{
		Runtime:        rt,
		Prepare:        rt.Prepare,
		Destroy:        func(ctx context.Context, sb isolate.Sandbox) error { return sb.Destroy(ctx) },
		DestroyTimeout: destroyTimeout,
		Pool:           "pool",
		Item:           "sandbox",
	})
	if err != nil {
		return nil, err
	}
	return &Pool{Core: c, rt: rt}, nil
}

// destroyTimeout bounds the destroy of a sandbox that a fill prepared
// after Close.
const destroyTimeout = 10 * time.Second

// Take returns a sandbox for t: a prepared one when the pool holds one for
// exactly t, else a new one from the runtime's Prepare (a cold take,
// counted). The sandbox is the caller's alone and is never handed out
// again; the caller runs one job in it and destroys it.
func (p *Pool) Take(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	if sb, ok := p.TakeIdle(t, nil); ok {
		return sb, nil
	}
	return p.rt.Prepare(ctx, t)
}

// Run runs s in a sandbox from Take, as isolate.RunWithSandbox does with a
// fresh one: the same usability check first, the same destroy with its own
// deadline, and a failed destroy turns the outcome into KindCleanupFailed.
func (p *Pool) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	return isolate.RunIn(ctx, p.rt, func(ctx context.Context) (isolate.Sandbox, error) {
		return p.Take(ctx, s.Template)
	}, s.Job)
}
