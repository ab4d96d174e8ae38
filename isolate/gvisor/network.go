package gvisor

import (
	"slices"

	"github.com/awf-project/awf/isolate"
)

// withNetwork gives a sandbox that joins a network (isolate.Template's
// Network, an enclave) runsc's own network stack on that namespace:
// --network=sandbox makes the Sentry's netstack drive the namespace's one
// link, so the job's sockets are the Sentry's, never host sockets. The
// namespace comes from the description (the network namespace's path).
// Host cgroup socket hooks cannot see the Sentry's traffic; the enclave's
// link filter, which sees frames, is the eBPF layer here.
func withNetwork(args []string, t isolate.Template) []string {
	if t.Network == nil {
		return args
	}
	out := slices.Clone(args)
	for i, a := range out {
		if a == "--network=none" {
			out[i] = "--network=sandbox"
		}
	}
	return out
}
