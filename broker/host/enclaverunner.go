package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/policy"
)

// listenerHandoff is the API proxy's control channel as the enclave
// runtime uses it (apiproxy.Control): the proxy end of each enclave link
// is handed to the proxy process, which never enters the namespace.
type listenerHandoff interface {
	Listen(ctx context.Context, l *net.TCPListener) (string, error)
	Unlisten(ctx context.Context, id string) error
}

// enclaveSandbox runs one enclave's job on a backend: t.Network is the
// enclave network to join (and confine the job's first process to), e the
// rest of the enclave. It is the backend's part of an enclave: rendering
// e's read-only layout (backendSandbox).
type enclaveSandbox func(ctx context.Context, t isolate.Template, e broker.Enclave) broker.EnclaveOutcome

// enclaveRuntime runs enclaves on a backend: per invocation it builds the
// enclave's network (isolate/enclave: its own namespace whose only link
// leads to the proxy end, and the eBPF layers), or takes a network and a
// sandbox its warm pool prepared ahead (enclaverunner_pool.go), hands the
// proxy end's listener to the API proxy, runs the sandbox joined to that
// network, then takes everything down again in reverse order. A teardown
// step that fails turns the outcome into a cleanup failure: the answer is
// withheld.
type enclaveRuntime struct {
	isolate.Runtime
	runID   string
	proxy   listenerHandoff
	sandbox enclaveSandbox
	// prepare prepares an enclave's sandbox ahead of its invocation, on
	// the network in the template; nil when the backend cannot
	// (enclaverunner_pool.go).
	prepare enclavePrepare
	// newNetwork is enclave.New.
	newNetwork func(context.Context, enclave.Options) (*enclave.Enclave, error)
	// pool holds the enclaves prepared ahead; nil without a warm pool.
	pool *enclavePool
}

var _ broker.EnclaveRunner = (*enclaveRuntime)(nil)

// enclaveTeardownTimeout bounds each teardown step.
const enclaveTeardownTimeout = 10 * time.Second

// RunEnclave implements broker.EnclaveRunner.
func (r *enclaveRuntime) RunEnclave(ctx context.Context, t isolate.Template, e broker.Enclave) (out broker.EnclaveOutcome) {
	fail := func(kind isolate.Kind, format string, args ...any) broker.EnclaveOutcome {
		return broker.EnclaveOutcome{Outcome: isolate.Err(kind, format, args...)}
	}
	if err := e.Validate(); err != nil {
		return fail(isolate.KindLaunchFailed, "%v", err)
	}
	if t.Network != nil || t.Weaken.Any() {
		return fail(isolate.KindLaunchFailed, "enclave: the template already has a network or a weakening")
	}
	// An enclave prepared ahead for exactly this template and shape, if
	// the pool holds one: its network and its sandbox are this
	// invocation's alone, and it is never handed out again.
	p := r.pool.take(t, e)
	var n *enclave.Enclave
	if p != nil {
		n = p.net
	} else {
		var err error
		if n, err = r.newNetwork(ctx, enclave.Options{RunID: r.runID, Name: e.InvocationID}); err != nil {
			return fail(isolate.KindLaunchFailed, "enclave network: %v", err)
		}
	}
	var teardown []error
	defer func() {
		if err := n.Close(); err != nil {
			teardown = append(teardown, fmt.Errorf("enclave network: %w", err))
		}
		if len(teardown) > 0 {
			out = broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindCleanupFailed, ExitCode: -1,
				Detail: fmt.Sprintf("%v (outcome was %s)", errors.Join(teardown...), out.Kind), Timings: out.Timings}}
		}
	}()
	if p != nil {
		// Destroyed unused if the invocation fails before it runs (Run
		// destroys it otherwise), before its network goes.
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enclaveTeardownTimeout)
			defer cancel()
			if err := p.sb.Destroy(dctx); err != nil {
				teardown = append(teardown, fmt.Errorf("destroy the prepared enclave: %w", err))
			}
		}()
	}
	if n.Proxy() != e.Proxy {
		return fail(isolate.KindLaunchFailed, "enclave: the link's proxy %s is not the loop's %s", n.Proxy(), e.Proxy)
	}
	id, err := r.proxy.Listen(ctx, n.Listener())
	if err != nil {
		return fail(isolate.KindLaunchFailed, "hand the enclave link to the API proxy: %v", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enclaveTeardownTimeout)
		defer cancel()
		if err := r.proxy.Unlisten(uctx, id); err != nil {
			teardown = append(teardown, fmt.Errorf("take the enclave link from the API proxy: %w", err))
		}
	}()
	if p != nil {
		return p.sb.Run(ctx, e)
	}
	t.Network = n.Network()
	return r.sandbox(ctx, t, e)
}

// enclaveBackend is a runtime that renders an enclave's layout: the
// direct and gvisor runtimes.
type enclaveBackend interface {
	RunEnclave(ctx context.Context, t isolate.Template, l enclave.Layout, job isolate.Job) (isolate.Outcome, []byte)
}

// enclaveRootDirs are the mount points the loop's root adds to every
// backend's.
var enclaveRootDirs = []string{"/enclave"}

// backendSandbox is rt's enclaveSandbox, or nil when rt renders no
// enclave. root is the loop's minimal root (buildEnclaveRoot) and pol the
// loop's seccomp policy (policy.AgentLoop): the template's query root and
// python3 policy are never an enclave's.
func backendSandbox(rt isolate.Runtime, root string, pol *policy.Policy) enclaveSandbox {
	b, ok := rt.(enclaveBackend)
	if !ok || pol == nil {
		return nil
	}
	return func(ctx context.Context, t isolate.Template, e broker.Enclave) broker.EnclaveOutcome {
		t, err := enclaveTemplate(t, e, root, pol)
		if err != nil {
			return broker.EnclaveOutcome{Outcome: isolate.Err(isolate.KindLaunchFailed, "%v", err)}
		}
		out, transcript := b.RunEnclave(ctx, t, enclaveLayout(e), isolate.Job{InvocationID: e.InvocationID, Argv: e.Argv})
		return broker.EnclaveOutcome{Outcome: out, Transcript: transcript}
	}
}

// enclaveTemplate is the backend template of enclave e from the broker's
// template t (whose network it keeps): the loop's minimal root, e's
// limits and the loop's policy, never weakened. A cold and a prepared
// enclave get the same one.
func enclaveTemplate(t isolate.Template, e broker.Enclave, root string, pol *policy.Policy) (isolate.Template, error) {
	if e.UID != isolate.SandboxUID || e.GID != isolate.SandboxGID {
		return t, fmt.Errorf("enclave: uid/gid %d/%d is not the sandbox user's", e.UID, e.GID)
	}
	// No overlay and no writable copy: the seed is a read-only bind.
	t.RootFS, t.Repo, t.Limits = root, "", e.Limits
	t.Limits.OutputBytes = e.ResultBytes
	// The loop's own reviewed policy: TCP/IPv4 stream sockets only, no
	// raw, packet, netlink or vsock socket, on every backend.
	t.Policy, t.Weaken = pol, isolate.Weakening{}
	return t, nil
}

// enclaveLayout renders e as the backends' enclave layout.
func enclaveLayout(e broker.Enclave) enclave.Layout {
	l := enclave.Layout{
		Dir:   "/enclave",
		Binds: []enclave.Bind{{Source: e.SeedDir, Path: broker.EnclaveRepoDir}, {Source: e.LoopBinary, Path: broker.EnclaveLoopPath, Exec: true}},
		Out:   broker.EnclaveOutDir, OutBytes: e.Limits.QueryTmpfsBytes,
		Env:    append([]string(nil), e.Env...),
		Result: filepath.Base(broker.EnclaveResultPath), Transcript: filepath.Base(broker.EnclaveTranscriptPath),
		TranscriptBytes: e.TranscriptBytes,
	}
	for _, f := range e.Files {
		l.Files = append(l.Files, enclave.RootFile{Path: f.Path, Content: f.Content, Mode: 0o444})
	}
	return l
}

// buildEnclaveRoot builds the loop's minimal root in dir (which must not
// exist): the mount points and nothing else; the loop binary is bound in.
func buildEnclaveRoot(ctx context.Context, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("bounded agents: enclave root: %w", err)
	}
	return enclave.Root(ctx, dir, enclaveRootDirs, nil)
}
