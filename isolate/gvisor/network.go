package gvisor

import (
	"os/exec"
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

// networkCommand starts runsc with args. For a sandbox that joins a network
// it starts runsc in a private mount namespace where /proc/sys/net is an
// empty read-only tmpfs: runsc releases from before 2023 take any network
// namespace that has /proc/sys/net/core/rmem_default for the host's and
// refuse to run there ("cannot run with network enabled in root network
// namespace"), and Linux 6.x has that file in every namespace. Only
// /proc/sys/net itself can be covered: the directories below it are each
// namespace's own, so a mount on one does not hide the enclave's. The
// mount is runsc's view only (runsc, its gofer and the Sentry's host
// process, which scrape the namespace's links and routes over netlink,
// not sysctl); the Sentry's netstack has its own settings.
func networkCommand(runsc string, args []string, t isolate.Template) *exec.Cmd {
	if t.Network == nil {
		return exec.Command(runsc, args...)
	}
	const script = `mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k awf-runsc-netns /proc/sys/net && exec "$0" "$@"`
	return exec.Command("/usr/bin/unshare", append([]string{"--mount", "--propagation", "slave", "--", "/bin/sh", "-c", script, runsc}, args...)...)
}
