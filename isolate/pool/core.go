package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/awf-project/awf/isolate"
)

// Items says what a Core keeps and how: how one item is prepared for a
// template and destroyed unused, and what the errors call the pool and
// an item. Every field is required.
type Items[T any] struct {
	// Runtime is asked before each fill whether it is usable (a runtime
	// that is not prepares nothing), and is named in that error.
	Runtime interface {
		Name() string
		Usable() error
	}
	// Prepare prepares one item for exactly t. An item that fails to
	// prepare leaves nothing behind (Prepare removes what it made).
	Prepare func(ctx context.Context, t isolate.Template) (T, error)
	// Destroy destroys an item that nobody ran.
	Destroy func(ctx context.Context, item T) error
	// DestroyTimeout bounds the destroy of an item nobody will use: one
	// that a fill prepared after Close, or one that TakeIdle refused.
	DestroyTimeout time.Duration
	// Pool and Item name the pool and one item in errors ("pool" and
	// "sandbox", "enclave pool" and "enclave").
	Pool, Item string
}

// Core holds up to Size prepared items per template: the single-use
// bookkeeping that every warm pool shares (isolate/pool's sandboxes, the
// bounded-agent broker's enclaves). TakeIdle removes the item it returns
// and there is no way to give one back; items are keyed by the whole
// template; a template whose prepare fails is left short; Close destroys
// the idle items, and an item that a fill prepares after Close is
// destroyed by that fill. The zero value is not usable; use NewCore. Its
// methods are safe for concurrent use, but a fill must not run beside a
// job (see the package comment).
type Core[T any] struct {
	items Items[T]
	size  int
	// order is the templates to keep filled, in NewCore's order,
	// deduplicated.
	order []isolate.Template

	mu sync.Mutex // guards idle, closed and stats
	// idle is keyed by the whole template: RunID, RootFS, Repo, every
	// limit, the policy (by pointer: an equal policy at another address is
	// another key, a miss and never a wrong hit), Network and Weaken. That
	// isolate.Template is a valid map key is checked by the compiler; a
	// field that is not comparable would fail this build, not the keying.
	idle   map[isolate.Template][]T
	closed bool
	stats  Stats
}

// NewCore returns an empty core that keeps size items prepared for each
// of templates (a template given twice is kept once). size must be at
// least 1. Which templates may be pooled at all is the caller's rule.
func NewCore[T any](size int, templates []isolate.Template, items Items[T]) (*Core[T], error) {
	if size < 1 {
		return nil, fmt.Errorf("%s: size %d must be at least 1", items.Pool, size)
	}
	c := &Core[T]{items: items, size: size, idle: map[isolate.Template][]T{}}
	seen := map[isolate.Template]bool{}
	for _, t := range templates {
		if !seen[t] {
			seen[t] = true
			c.order = append(c.order, t)
		}
	}
	return c, nil
}

// Size is the number of items kept per template.
func (c *Core[T]) Size() int { return c.size }

// Templates are the templates kept filled, in the order Fill fills them,
// each once.
func (c *Core[T]) Templates() []isolate.Template {
	return append([]isolate.Template(nil), c.order...)
}

// TakeIdle removes and returns an idle item prepared for exactly t (a
// warm take, counted): it is the caller's alone, to run once and destroy.
// It reports false (a cold take, counted) when there is none or the core
// is closed. fits, when not nil, is asked about the item first: one that
// does not fit is destroyed, never returned, and the take is cold.
func (c *Core[T]) TakeIdle(t isolate.Template, fits func(T) bool) (T, bool) {
	var none T
	c.mu.Lock()
	q := c.idle[t]
	if c.closed || len(q) == 0 {
		c.stats.Cold++
		c.mu.Unlock()
		return none, false
	}
	item := q[0]
	q[0] = none
	c.idle[t] = q[1:]
	if fits != nil && !fits(item) {
		c.stats.Cold++
		c.stats.Destroyed++
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.items.DestroyTimeout)
		defer cancel()
		_ = c.items.Destroy(ctx, item) // the runtime marks itself unusable if it cannot
		return none, false
	}
	c.stats.Warm++
	c.mu.Unlock()
	return item, true
}

// Missing is how many items Fill would prepare now: 0 when the core is
// full or closed.
func (c *Core[T]) Missing() int { return c.MissingFor(c.order...) }

// MissingFor is how many items FillFor(ts) would prepare now: 0 when each
// of ts is full or is not one of Templates, or the core is closed.
func (c *Core[T]) MissingFor(ts ...isolate.Template) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0
	}
	n := 0
	for _, t := range c.kept(ts) {
		n += c.size - len(c.idle[t])
	}
	return n
}

// kept is those of ts that are Templates, each once, in the order of ts.
func (c *Core[T]) kept(ts []isolate.Template) []isolate.Template {
	var out []isolate.Template
	for _, t := range ts {
		if slices.Contains(c.order, t) && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Fill prepares items until every template has Size of them, template by
// template in order, and returns how many it prepared. A template whose
// prepare fails is left short (its next take is cold) and its error is
// returned, joined with the others; a runtime that is not usable prepares
// nothing. Call it only when no job runs (see the package comment), with a
// deadline in ctx.
func (c *Core[T]) Fill(ctx context.Context) (int, error) { return c.FillFor(ctx, c.order...) }

// FillFor is Fill for ts alone, in the order of ts: a template that is
// not one of Templates prepares nothing.
func (c *Core[T]) FillFor(ctx context.Context, ts ...isolate.Template) (int, error) {
	if err := c.items.Runtime.Usable(); err != nil {
		return 0, fmt.Errorf("%s: runtime %s unusable: %w", c.items.Pool, c.items.Runtime.Name(), err)
	}
	var errs []error
	made := 0
	for _, t := range c.kept(ts) {
		n, err := c.fill(ctx, t)
		made += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return made, errors.Join(errs...)
}

// fill prepares items for t until it has Size, or its prepare fails, or
// the core is closed.
func (c *Core[T]) fill(ctx context.Context, t isolate.Template) (int, error) {
	made := 0
	for {
		c.mu.Lock()
		need := !c.closed && len(c.idle[t]) < c.size
		c.mu.Unlock()
		if !need {
			return made, nil
		}
		item, err := c.items.Prepare(ctx, t)
		if err != nil {
			// A prepare cut short by its caller (a shutdown) is not a
			// failure of the runtime.
			if ctx.Err() == nil {
				c.mu.Lock()
				c.stats.Failed++
				c.mu.Unlock()
			}
			return made, fmt.Errorf("%s: prepare for %s: %w", c.items.Pool, t.Repo, err)
		}
		c.mu.Lock()
		if c.closed {
			// Close ran meanwhile: this one is nobody's; reclaim it now.
			c.mu.Unlock()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.items.DestroyTimeout)
			derr := c.items.Destroy(dctx, item)
			cancel()
			if derr != nil {
				return made, fmt.Errorf("%s: destroy after close: %w", c.items.Pool, derr)
			}
			return made, nil
		}
		c.idle[t] = append(c.idle[t], item)
		c.stats.Prepared++
		made++
		c.mu.Unlock()
	}
}

// Close destroys every idle item, each under ctx (give it a deadline),
// and makes later takes cold and later fills no-ops. A failed destroy is
// returned; the runtime itself marks itself unusable when it cannot
// reclaim an item. Close may be called more than once.
func (c *Core[T]) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	var all []T
	for _, t := range c.order {
		all = append(all, c.idle[t]...)
		delete(c.idle, t)
	}
	c.mu.Unlock()
	var errs []error
	for _, item := range all {
		if err := c.items.Destroy(ctx, item); err != nil {
			errs = append(errs, fmt.Errorf("%s: destroy an idle %s: %w", c.items.Pool, c.items.Item, err))
		}
	}
	c.mu.Lock()
	c.stats.Destroyed += len(all)
	c.mu.Unlock()
	return errors.Join(errs...)
}

// Stats returns the core's counters.
func (c *Core[T]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	for _, q := range c.idle {
		s.Idle += len(q)
	}
	return s
}
