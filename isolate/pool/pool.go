// Package pool keeps single-use sandboxes prepared ahead of their requests,
// for any isolate.Runtime, so that a request pays for Exec and Destroy only.
//
// A pool never reuses a sandbox. Take removes the sandbox it returns, and
// there is no way to give one back: whoever takes a sandbox runs at most one
// job in it and destroys it. A prepared sandbox has run nothing yet (no
// script, no job), so what it can carry to the job that takes it is what a
// cold Prepare would give that job.
//
// A pool does not decide when to refill. Fill prepares sandboxes on the
// caller's goroutine, and the caller must call it only when no job runs
// beside it (the broker does so on its lane, after the response), so that
// a sandbox is never being prepared while a job could observe it. A pool
// does not hold an enclave (a template with a Network): an enclave's network
// belongs to one invocation.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/awf-project/awf/isolate"
)

// Stats are a pool's counters since New.
type Stats struct {
	// Idle is how many prepared sandboxes wait now, over all templates.
	Idle int
	// Warm counts the Takes served by a prepared sandbox.
	Warm int
	// Cold counts the Takes that found none and prepared one on the spot.
	Cold int
	// Prepared counts the sandboxes Fill prepared; Failed counts its
	// Prepare calls that failed.
	Prepared, Failed int
	// Destroyed counts the idle sandboxes Close destroyed (or tried to:
	// its error says which failed).
	Destroyed int
}

// Pool holds up to Size prepared sandboxes per template. The zero value is
// not usable; use New. Its methods are safe for concurrent use, but Fill
// must not run beside a job (see the package comment).
type Pool struct {
	rt   isolate.Runtime
	size int
	// order is the templates to keep filled, in New's order, deduplicated.
	order []isolate.Template

	mu sync.Mutex // guards idle, closed and stats
	// idle is keyed by the whole template: RunID, RootFS, Repo, every
	// limit, the policy (by pointer: an equal policy at another address is
	// another key, a miss and never a wrong hit), Network and Weaken. That
	// isolate.Template is a valid map key is checked by the compiler; a
	// field that is not comparable would fail this build, not the keying.
	idle   map[isolate.Template][]isolate.Sandbox
	closed bool
	stats  Stats
}

// New returns an empty pool that keeps size sandboxes prepared for each of
// templates. size must be at least 1 (no pool at all is the caller's
// choice of not building one); a template with a Network is refused.
func New(rt isolate.Runtime, size int, templates []isolate.Template) (*Pool, error) {
	if rt == nil {
		return nil, errors.New("pool: no runtime")
	}
	if size < 1 {
		return nil, fmt.Errorf("pool: size %d must be at least 1", size)
	}
	p := &Pool{rt: rt, size: size, idle: map[isolate.Template][]isolate.Sandbox{}}
	seen := map[isolate.Template]bool{}
	for _, t := range templates {
		if t.Network != nil {
			return nil, fmt.Errorf("pool: template for %s names a network: an enclave is never pooled", t.Repo)
		}
		if !seen[t] {
			seen[t] = true
			p.order = append(p.order, t)
		}
	}
	return p, nil
}

// Size is the number of sandboxes kept per template.
func (p *Pool) Size() int { return p.size }

// Take returns a sandbox for t: a prepared one when the pool holds one for
// exactly t, else a new one from the runtime's Prepare (a cold take,
// counted). The sandbox is the caller's alone and is never handed out
// again; the caller runs one job in it and destroys it.
func (p *Pool) Take(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	p.mu.Lock()
	if q := p.idle[t]; !p.closed && len(q) > 0 {
		sb := q[0]
		q[0] = nil
		p.idle[t] = q[1:]
		p.stats.Warm++
		p.mu.Unlock()
		return sb, nil
	}
	p.stats.Cold++
	p.mu.Unlock()
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

// Missing is how many sandboxes Fill would prepare now: 0 when the pool is
// full or closed.
func (p *Pool) Missing() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	n := 0
	for _, t := range p.order {
		n += p.size - len(p.idle[t])
	}
	return n
}

// Fill prepares sandboxes until every template has Size of them, and
// returns how many it prepared. A template whose Prepare fails is left
// short (the next Take for it is cold) and its error is returned, joined
// with the others; a runtime that is not usable prepares nothing. Call it
// only when no job runs (see the package comment), with a deadline in ctx.
func (p *Pool) Fill(ctx context.Context) (int, error) {
	if err := p.rt.Usable(); err != nil {
		return 0, fmt.Errorf("pool: runtime %s unusable: %w", p.rt.Name(), err)
	}
	var errs []error
	made := 0
	for _, t := range p.order {
		for {
			p.mu.Lock()
			need := !p.closed && len(p.idle[t]) < p.size
			p.mu.Unlock()
			if !need {
				break
			}
			sb, err := p.rt.Prepare(ctx, t)
			if err != nil {
				p.mu.Lock()
				p.stats.Failed++
				p.mu.Unlock()
				errs = append(errs, fmt.Errorf("pool: prepare for %s: %w", t.Repo, err))
				break
			}
			p.mu.Lock()
			if p.closed {
				// Close ran meanwhile: this one is nobody's; reclaim it now.
				p.mu.Unlock()
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
				derr := sb.Destroy(dctx)
				cancel()
				if derr != nil {
					errs = append(errs, fmt.Errorf("pool: destroy after close: %w", derr))
				}
				return made, errors.Join(errs...)
			}
			p.idle[t] = append(p.idle[t], sb)
			p.stats.Prepared++
			made++
			p.mu.Unlock()
		}
	}
	return made, errors.Join(errs...)
}

// destroyTimeout bounds the destroy of a sandbox that Fill prepared after
// Close.
const destroyTimeout = 10 * time.Second

// Close destroys every idle sandbox, each under ctx (give it a deadline),
// and makes later Takes cold and later Fills no-ops. A failed Destroy is
// returned; the runtime itself marks itself unusable when it cannot reclaim
// a sandbox. Close may be called more than once.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	var all []isolate.Sandbox
	for _, t := range p.order {
		all = append(all, p.idle[t]...)
		delete(p.idle, t)
	}
	p.mu.Unlock()
	var errs []error
	for _, sb := range all {
		if err := sb.Destroy(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pool: destroy an idle sandbox: %w", err))
		}
	}
	p.mu.Lock()
	p.stats.Destroyed += len(all)
	p.mu.Unlock()
	return errors.Join(errs...)
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	for _, q := range p.idle {
		s.Idle += len(q)
	}
	return s
}
