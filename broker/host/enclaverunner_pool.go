package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/pool"
	"github.com/awf-project/awf/policy"
)

// The bounded-agent warm pool: enclaves prepared ahead of their
// invocations, as isolate/pool prepares query sandboxes. A prepared
// enclave is its own network (enclave.New: both namespaces, the link, the
// proxy end's listener, the link filter) and a sandbox on it with every
// control in place, the network joined and confined, and init waiting to
// exec the loop; the invocation's files (task, schema, loop config with
// its capability) are written into its read-only directory by Run, before
// the loop exists. The proxy end is handed to the API proxy only by the
// invocation, and taken back by it. Each is single-use: take removes it,
// and there is no way to give one back. The broker fills the pool on its
// lane after the response, held to the refill's own bucket (broker.Refill).

// preparedSandbox is a backend's enclave sandbox prepared ahead: Run
// writes e's files, runs e's job and destroys the sandbox; Destroy
// destroys it unused (and does nothing after Run).
type preparedSandbox interface {
	Run(ctx context.Context, e broker.Enclave) broker.EnclaveOutcome
	Destroy(ctx context.Context) error
}

// enclavePrepare prepares e's sandbox (e without its files and id) on the
// network in t.Network.
type enclavePrepare func(ctx context.Context, t isolate.Template, e broker.Enclave) (preparedSandbox, error)

// enclavePreparer is a backend that prepares enclaves ahead: direct.
type enclavePreparer interface {
	PrepareEnclave(ctx context.Context, t isolate.Template, l enclave.Layout, argv []string) (*direct.PreparedEnclave, error)
}

// backendPrepare is rt's enclavePrepare, or nil when rt cannot prepare an
// enclave ahead. It renders the same template and layout as
// backendSandbox does cold, without the files.
func backendPrepare(rt isolate.Runtime, root string, pol *policy.Policy) enclavePrepare {
	b, ok := rt.(enclavePreparer)
	if !ok || pol == nil {
		return nil
	}
	return func(ctx context.Context, t isolate.Template, e broker.Enclave) (preparedSandbox, error) {
		t, err := enclaveTemplate(t, e, root, pol)
		if err != nil {
			return nil, err
		}
		l := enclaveLayout(e)
		l.Files = nil
		p, err := b.PrepareEnclave(ctx, t, l, e.Argv)
		if err != nil {
			return nil, err
		}
		return directPrepared{p}, nil
	}
}

// directPrepared is direct's prepared enclave as a preparedSandbox.
type directPrepared struct{ p *direct.PreparedEnclave }

func (d directPrepared) Run(ctx context.Context, e broker.Enclave) broker.EnclaveOutcome {
	out, transcript := d.p.Run(ctx, enclaveLayout(e).Files, isolate.Job{InvocationID: e.InvocationID, Argv: e.Argv})
	return broker.EnclaveOutcome{Outcome: out, Transcript: transcript}
}

func (d directPrepared) Destroy(ctx context.Context) error { return d.p.Destroy(ctx) }

// preparedEnclave is one enclave of the pool: its network and its sandbox
// on it, prepared to shape.
type preparedEnclave struct {
	shape broker.Enclave
	net   *enclave.Enclave
	sb    preparedSandbox
}

// destroy destroys the sandbox, then the network.
func (p *preparedEnclave) destroy(ctx context.Context) error {
	return errors.Join(p.sb.Destroy(ctx), p.net.Close())
}

// enclavePool keeps size enclaves prepared for each template, keyed by the
// whole template (as isolate/pool is) and checked against the whole shape
// of the invocation's enclave. It is a broker.WarmPool.
type enclavePool struct {
	r     *enclaveRuntime
	size  int
	order []isolate.Template
	shape func(isolate.Template) broker.Enclave

	mu     sync.Mutex // guards idle, closed and stats
	idle   map[isolate.Template][]*preparedEnclave
	closed bool
	stats  pool.Stats
}

var _ broker.EnclavePooler = (*enclaveRuntime)(nil)

// EnclavePool implements broker.EnclavePooler: the runtime's one pool.
func (r *enclaveRuntime) EnclavePool(size int, templates []isolate.Template, shape func(isolate.Template) broker.Enclave) (broker.WarmPool, error) {
	switch {
	case r.prepare == nil:
		return nil, fmt.Errorf("enclave pool: runtime %s prepares no enclave ahead", r.Name())
	case r.pool != nil:
		return nil, errors.New("enclave pool: the runtime has one already")
	case size < 1:
		return nil, fmt.Errorf("enclave pool: size %d must be at least 1", size)
	case shape == nil:
		return nil, errors.New("enclave pool: no shape")
	}
	p := &enclavePool{r: r, size: size, shape: shape, idle: map[isolate.Template][]*preparedEnclave{}}
	seen := map[isolate.Template]bool{}
	for _, t := range templates {
		if t.Network != nil || t.Weaken.Any() {
			return nil, fmt.Errorf("enclave pool: template for %s names a network or a weakening", t.Repo)
		}
		if !seen[t] {
			seen[t] = true
			p.order = append(p.order, t)
		}
	}
	r.pool = p
	return p, nil
}

// take returns the prepared enclave for exactly t whose shape is e's, and
// removes it: it is the caller's alone. Nil (a cold invocation, counted)
// when there is none, the pool is closed, or p is nil (no pool). One of
// another shape is never run: it is destroyed.
func (p *enclavePool) take(t isolate.Template, e broker.Enclave) *preparedEnclave {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	q := p.idle[t]
	if p.closed || len(q) == 0 {
		p.stats.Cold++
		p.mu.Unlock()
		return nil
	}
	pe := q[0]
	q[0] = nil
	p.idle[t] = q[1:]
	if !pe.shape.SameShape(e) {
		p.stats.Cold++
		p.stats.Destroyed++
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), enclaveTeardownTimeout)
		defer cancel()
		_ = pe.destroy(ctx) // the runtime marks itself unusable if it cannot
		return nil
	}
	p.stats.Warm++
	p.mu.Unlock()
	return pe
}

// Size implements broker.WarmPool.
func (p *enclavePool) Size() int { return p.size }

// Missing implements broker.WarmPool.
func (p *enclavePool) Missing() int {
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

// Fill implements broker.WarmPool: it prepares enclaves until every
// template has Size, each a fresh network and a sandbox on it. A failed
// prepare removes what it made, leaves its template short (its next
// invocation is cold) and is returned; a runtime that is not usable
// prepares nothing. Only with the lane held, as isolate/pool's Fill.
func (p *enclavePool) Fill(ctx context.Context) (int, error) {
	if err := p.r.Usable(); err != nil {
		return 0, fmt.Errorf("enclave pool: runtime %s unusable: %w", p.r.Name(), err)
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
			pe, err := p.prepareOne(ctx, t)
			if err != nil {
				p.mu.Lock()
				p.stats.Failed++
				p.mu.Unlock()
				errs = append(errs, fmt.Errorf("enclave pool: prepare for %s: %w", t.Repo, err))
				break
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enclaveTeardownTimeout)
				derr := pe.destroy(dctx)
				cancel()
				if derr != nil {
					errs = append(errs, fmt.Errorf("enclave pool: destroy after close: %w", derr))
				}
				return made, errors.Join(errs...)
			}
			p.idle[t] = append(p.idle[t], pe)
			p.stats.Prepared++
			made++
			p.mu.Unlock()
		}
	}
	return made, errors.Join(errs...)
}

// prepareOne prepares one enclave for t: its network, named like an
// invocation's (a fresh random name: no invocation is known yet), and its
// sandbox on it. On failure the network is removed again.
func (p *enclavePool) prepareOne(ctx context.Context, t isolate.Template) (*preparedEnclave, error) {
	shape := p.shape(t)
	if err := shape.Validate(); err != nil {
		return nil, err
	}
	var name [12]byte
	if _, err := rand.Read(name[:]); err != nil {
		return nil, err
	}
	n, err := p.r.newNetwork(ctx, enclave.Options{RunID: p.r.runID, Name: hex.EncodeToString(name[:])})
	if err != nil {
		return nil, fmt.Errorf("enclave network: %w", err)
	}
	if n.Proxy() != shape.Proxy {
		err = fmt.Errorf("enclave: the link's proxy %s is not the loop's %s", n.Proxy(), shape.Proxy)
	} else {
		t.Network = n.Network()
		var sb preparedSandbox
		if sb, err = p.r.prepare(ctx, t, shape); err == nil {
			return &preparedEnclave{shape: shape, net: n, sb: sb}, nil
		}
	}
	if cerr := n.Close(); cerr != nil {
		err = fmt.Errorf("%w (and removing its network: %v)", err, cerr)
	}
	return nil, err
}

// Close implements broker.WarmPool: every idle enclave is destroyed, its
// sandbox then its network, under ctx; later invocations are cold and
// later Fills do nothing.
func (p *enclavePool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	var all []*preparedEnclave
	for _, t := range p.order {
		all = append(all, p.idle[t]...)
		delete(p.idle, t)
	}
	p.mu.Unlock()
	var errs []error
	for _, pe := range all {
		if err := pe.destroy(ctx); err != nil {
			errs = append(errs, fmt.Errorf("enclave pool: destroy an idle enclave: %w", err))
		}
	}
	p.mu.Lock()
	p.stats.Destroyed += len(all)
	p.mu.Unlock()
	return errors.Join(errs...)
}

// Stats implements broker.WarmPool.
func (p *enclavePool) Stats() pool.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	for _, q := range p.idle {
		s.Idle += len(q)
	}
	return s
}

// Run implements broker.WarmPool: an enclave pool runs no query or probe
// (an enclave is never a query sandbox).
func (p *enclavePool) Run(context.Context, isolate.Spec) isolate.Outcome {
	return isolate.Err(isolate.KindLaunchFailed, "enclave pool: an enclave never runs a query")
}
