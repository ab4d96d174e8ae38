package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/verify"
)

// enclaveVerify is what "awf isolate verify --enclave" needs from the
// command line.
type enclaveVerify struct {
	runtimes, required []string
	explicit           bool // --runtime was given
	probe              string
	format             string
	stateDir           string
	cgroupParent       string
	runsc              string
	dockerSocket       string
}

// runEnclaveVerify runs the enclave battery and writes its report: the
// bounded-agent network probes from inside a real enclave on each runtime
// (default: direct, and gvisor, which may be BLOCKED): the API proxy's
// address and port are reachable; host loopback, the host's addresses,
// link-local neighbours, DNS, IPv6, UDP, vsock, abstract and filesystem
// Unix sockets are not. The probe is the static enclave-probe binary that
// make build puts next to awf.
func runEnclaveVerify(ctx context.Context, e env, o enclaveVerify) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "awf isolate verify: "+format+"\n", args...)
		return 2
	}
	if !o.explicit {
		o.runtimes, o.required = []string{"direct", "gvisor"}, []string{"direct"}
	}
	probe := o.probe
	if probe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fail("%v", err)
		}
		probe = filepath.Join(filepath.Dir(exe), "enclave-probe")
	}
	split, err := host.SplitCPUs()
	if err != nil {
		return fail("%v", err)
	}
	sock, _, _ := host.DockerSocket(o.dockerSocket, os.Getenv("DOCKER_HOST"))
	rep, err := verify.RunEnclave(ctx, verify.EnclaveOptions{
		Runtimes: o.runtimes, Required: o.required, ProbeBinary: probe, HostAddrs: hostAddrs(),
		Host: isolate.HostConfig{StateDir: o.stateDir, CgroupParent: o.cgroupParent, RunscPath: o.runsc,
			DockerSocket: sock, SandboxCPUs: split.Sandbox},
	})
	if err != nil {
		return fail("%v", err)
	}
	if err := rep.Write(e.stdout, o.format); err != nil {
		return fail("%v", err)
	}
	if !rep.OK {
		return 1
	}
	return 0
}

// hostAddrs are the host's own unicast addresses besides loopback: verify
// puts a decoy on each, so that "not reachable" is measured, not assumed.
func hostAddrs() []netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ad := p.Addr()
		if ad.IsLoopback() || ad.IsLinkLocalUnicast() || ad.IsMulticast() || !ad.IsValid() {
			continue
		}
		out = append(out, ad)
	}
	return out
}
