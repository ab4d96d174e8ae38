package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
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
// rest of the enclave. It is the backend's part of an enclave, which no
// runtime offers yet: rendering e's read-only layout.
type enclaveSandbox func(ctx context.Context, t isolate.Template, e broker.Enclave) broker.EnclaveOutcome

// enclaveRuntime runs enclaves on a backend: per invocation it builds the
// enclave's network (isolate/enclave: its own namespace whose only link
// leads to the proxy end, and the eBPF layers), hands the proxy end's
// listener to the API proxy, runs the sandbox joined to that network, then
// takes everything down again in reverse order. A teardown step that fails
// turns the outcome into a cleanup failure: the answer is withheld.
type enclaveRuntime struct {
	isolate.Runtime
	runID   string
	proxy   listenerHandoff
	sandbox enclaveSandbox
	// newNetwork is enclave.New.
	newNetwork func(context.Context, enclave.Options) (*enclave.Enclave, error)
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
	n, err := r.newNetwork(ctx, enclave.Options{RunID: r.runID, Name: e.InvocationID})
	if err != nil {
		return fail(isolate.KindLaunchFailed, "enclave network: %v", err)
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
	t.Network = n.Network()
	return r.sandbox(ctx, t, e)
}
