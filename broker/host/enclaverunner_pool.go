package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

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

// enclavePool keeps size enclaves prepared for each template in a
// pool.Core, keyed by the whole template (as isolate/pool is) and checked
// against the whole shape of the invocation's enclave. It is a
// broker.WarmPool.
type enclavePool struct {
	*pool.Core[*preparedEnclave]
}

var _ broker.EnclavePooler = (*enclaveRuntime)(nil)

// EnclavePool implements broker.EnclavePooler: the runtime's one pool.
// Its fill prepares enclaves until every template has size, each a fresh
// network and a sandbox on it; a failed prepare removes what it made,
// leaves its template short (its next invocation is cold) and is
// returned; a runtime that is not usable prepares nothing. Only with the
// lane held, as isolate/pool's. Close destroys every idle enclave, its
// sandbox then its network.
func (r *enclaveRuntime) EnclavePool(size int, templates []isolate.Template, shape func(isolate.Template) broker.Enclave) (broker.WarmPool, error) {
	switch {
	case r.prepare == nil:
		return nil, fmt.Errorf("enclave pool: runtime %s prepares no enclave ahead", r.Name())
	case r.pool != nil:
		return nil, errors.New("enclave pool: the runtime has one already")
	case shape == nil:
		return nil, errors.New("enclave pool: no shape")
	}
	for _, t := range templates {
		if t.Network != nil || t.Weaken.Any() {
			return nil, fmt.Errorf("enclave pool: template for %s names a network or a weakening", t.Repo)
		}
	}
	c, err := pool.NewCore(size, templates, pool.Items[*preparedEnclave]{
		Runtime: r,
		Prepare: func(ctx context.Context, t isolate.Template) (*preparedEnclave, error) {
			return r.prepareOne(ctx, t, shape(t))
		},
		Destroy:        func(ctx context.Context, pe *preparedEnclave) error { return pe.destroy(ctx) },
		DestroyTimeout: enclaveTeardownTimeout,
		Pool:           "enclave pool",
		Item:           "enclave",
	})
	if err != nil {
		return nil, err
	}
	r.pool = &enclavePool{c}
	return r.pool, nil
}

// take returns the prepared enclave for exactly t whose shape is e's, and
// removes it: it is the caller's alone. Nil (a cold invocation, counted)
// when there is none, the pool is closed, or p is nil (no pool). One of
// another shape is never run: it is destroyed.
func (p *enclavePool) take(t isolate.Template, e broker.Enclave) *preparedEnclave {
	if p == nil {
		return nil
	}
	pe, _ := p.TakeIdle(t, func(pe *preparedEnclave) bool { return pe.shape.SameShape(e) })
	return pe
}

// prepareOne prepares one enclave of shape for t: its network, named like an
// invocation's (a fresh random name: no invocation is known yet), and its
// sandbox on it. On failure the network is removed again.
func (r *enclaveRuntime) prepareOne(ctx context.Context, t isolate.Template, shape broker.Enclave) (*preparedEnclave, error) {
	if err := shape.Validate(); err != nil {
		return nil, err
	}
	var name [12]byte
	if _, err := rand.Read(name[:]); err != nil {
		return nil, err
	}
	n, err := r.newNetwork(ctx, enclave.Options{RunID: r.runID, Name: hex.EncodeToString(name[:])})
	if err != nil {
		return nil, fmt.Errorf("enclave network: %w", err)
	}
	if n.Proxy() != shape.Proxy {
		err = fmt.Errorf("enclave: the link's proxy %s is not the loop's %s", n.Proxy(), shape.Proxy)
	} else {
		t.Network = n.Network()
		var sb preparedSandbox
		if sb, err = r.prepare(ctx, t, shape); err == nil {
			return &preparedEnclave{shape: shape, net: n, sb: sb}, nil
		}
	}
	if cerr := n.Close(); cerr != nil {
		err = fmt.Errorf("%w (and removing its network: %v)", err, cerr)
	}
	return nil, err
}

// Run implements broker.WarmPool: an enclave pool runs no query or probe
// (an enclave is never a query sandbox).
func (p *enclavePool) Run(context.Context, isolate.Spec) isolate.Outcome {
	return isolate.Err(isolate.KindLaunchFailed, "enclave pool: an enclave never runs a query")
}
