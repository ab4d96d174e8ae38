package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/policy"
)

// EnclaveProbePath is where the probe binary sits in its root.
const EnclaveProbePath = "/usr/bin/enclave-probe"

// EnclaveOptions control RunEnclave.
type EnclaveOptions struct {
	// Runtimes to verify (default: direct and gvisor).
	Runtimes []string
	// Required are the runtimes whose BLOCKED verdict fails the run.
	Required []string
	// Host is the host configuration the runtimes are opened with; RunID
	// and StateDir are verify's own, as for Run.
	Host isolate.HostConfig
	// ProbeBinary is cmd/enclave-probe, a static binary.
	ProbeBinary string
	// HostAddrs are host addresses to put decoys on besides loopback.
	HostAddrs []netip.Addr
	// WorkDir is where verify creates its scratch directory.
	WorkDir string
	// Open opens a runtime (nil = runtimes.Open).
	Open func(name string, h isolate.HostConfig) (isolate.Runtime, error)
	// Weaken removes enclave layers. Tests only: it proves that each layer
	// alone still blocks everything but the proxy.
	Weaken enclave.Weakening
	// NoPolicy runs the probe without agent-loop.policy, the third layer
	// (tests only, with Weaken: the network layers alone).
	NoPolicy bool
}

// EnclaveReport is the verdict of awf isolate verify --enclave.
type EnclaveReport struct {
	Runtimes []RuntimeReport `json:"runtimes"`
	OK       bool            `json:"ok"`
}

// Write renders the report as text or JSON.
func (r *EnclaveReport) Write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	for _, rr := range r.Runtimes {
		fmt.Fprintf(w, "%s: %s", rr.Name, rr.Status)
		if rr.Reason != "" {
			fmt.Fprintf(w, " (%s)", rr.Reason)
		}
		fmt.Fprintln(w)
		for _, res := range rr.Results {
			fmt.Fprintf(w, "  %-7s %s: %s\n", res.Status, res.ID, res.Evidence)
		}
	}
	verdict := "FAIL"
	if r.OK {
		verdict = "PASS"
	}
	_, err := fmt.Fprintf(w, "enclave network: %s\n", verdict)
	return err
}

// RunEnclave runs the enclave network probes from inside a real enclave in
// each runtime: a fresh enclave (isolate/enclave), a sandbox that joins
// it, and cmd/enclave-probe as the job, against a World of decoys. It
// returns an error only when verify itself cannot work.
func RunEnclave(ctx context.Context, o EnclaveOptions) (*EnclaveReport, error) {
	if len(o.Runtimes) == 0 {
		o.Runtimes = []string{"direct", "gvisor"}
	}
	if o.Open == nil {
		o.Open = runtimes.Open
	}
	o.Host.CgroupParent = o.Host.Parent()
	work, err := os.MkdirTemp(o.WorkDir, "awf-verify-enclave-")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer os.RemoveAll(work)
	root, err := enclaveProbeRoot(ctx, filepath.Join(work, "root"), o.ProbeBinary)
	if err != nil {
		return nil, err
	}
	rep := &EnclaveReport{OK: true}
	for _, name := range o.Runtimes {
		rr := runEnclaveRuntime(ctx, name, o, root, work)
		rr.Required = slices.Contains(o.Required, name)
		rr.finish(0)
		if rr.Failed() {
			rep.OK = false
		}
		rep.Runtimes = append(rep.Runtimes, rr)
	}
	return rep, nil
}

// enclaveProbeRoot builds the probe's root filesystem: the mount points
// every backend needs and the static probe, nothing else (no interpreter,
// no shell, no libraries).
func enclaveProbeRoot(ctx context.Context, dir, probe string) (string, error) {
	if probe == "" {
		return "", errors.New("verify: no enclave probe binary")
	}
	b, err := os.ReadFile(probe)
	if err != nil {
		return "", fmt.Errorf("verify: enclave probe: %w", err)
	}
	if len(b) < 4 || string(b[:4]) != "\x7fELF" {
		return "", fmt.Errorf("verify: enclave probe %s is not an ELF binary", probe)
	}
	if err := enclave.Root(ctx, dir, nil, []enclave.RootFile{{Path: EnclaveProbePath, Content: b, Mode: 0o755}}); err != nil {
		return "", fmt.Errorf("verify: probe root: %w", err)
	}
	return dir, nil
}

// runscRootNetNS is how a runsc release from before 2023 refuses any
// network namespace on a kernel whose every namespace has
// /proc/sys/net/core/rmem_default (its test for the host's namespace).
const runscRootNetNS = "cannot run with network enabled in root network namespace"

// runEnclaveRuntime runs the probes in one runtime.
func runEnclaveRuntime(ctx context.Context, name string, o EnclaveOptions, root, work string) (rr RuntimeReport) {
	rr.Name = name
	blocked := func(reason string) RuntimeReport {
		rr.Status, rr.Reason = Blocked, reason
		rr.Results = append(rr.Results, Result{ID: "enclave/network", Group: "enclave", Status: Blocked, Evidence: reason})
		return rr
	}
	stateDir, err := os.MkdirTemp(work, "state-"+name+"-")
	if err != nil {
		return blocked(fmt.Sprintf("state directory: %v", err))
	}
	h := o.Host
	h.RunID = "verify-" + randHex(8)
	h.StateDir = stateDir
	rt, err := o.Open(name, h)
	if err != nil {
		return blocked(err.Error())
	}
	defer rt.Close()
	if err := ProbeRuntime(ctx, rt); err != nil {
		return blocked(err.Error())
	}
	ectx, cancel := context.WithTimeout(ctx, 15*time.Second)
	e, err := enclave.New(ectx, enclave.Options{RunID: h.RunID, Name: "probe", Weaken: o.Weaken})
	cancel()
	if err != nil {
		rr.Results = append(rr.Results, Result{ID: "enclave/network", Group: "enclave", Status: Fail, Evidence: err.Error()})
		return rr
	}
	defer func() {
		cerr := e.Close()
		left := enclave.Resources(h.RunID)
		res := Result{ID: "enclave/leftovers", Group: "enclave", Status: Pass, Evidence: "the enclave's namespaces, links, hooks and cgroup are gone"}
		if cerr != nil || len(left) > 0 {
			res.Status, res.Evidence = Fail, fmt.Sprintf("close: %v; left: %s", cerr, strings.Join(left, " "))
		}
		rr.Results = append(rr.Results, res)
	}()
	w, err := enclave.NewWorld(e, enclave.WorldOptions{HostAddrs: o.HostAddrs})
	if err != nil {
		rr.Results = append(rr.Results, Result{ID: "enclave/network", Group: "enclave", Status: Fail, Evidence: err.Error()})
		return rr
	}
	defer w.Close()
	probeSpec := w.Spec(isolate.OutputPath)
	spec, err := json.Marshal(probeSpec)
	if err != nil {
		rr.Results = append(rr.Results, Result{ID: "enclave/network", Group: "enclave", Status: Fail, Evidence: err.Error()})
		return rr
	}
	// The probe runs under the loop's own policy (scope enclave-loop): the
	// third network layer, which alone keeps vsock, raw, packet, netlink,
	// IPv6, UDP and Unix sockets out of reach.
	pol, err := policy.AgentLoop()
	if err != nil {
		rr.Results = append(rr.Results, Result{ID: "enclave/network", Group: "enclave", Status: Fail, Evidence: err.Error()})
		return rr
	}
	t := isolate.Template{
		RunID: h.RunID, RootFS: root, Limits: isolate.DefaultLimits(), Network: e.Network(),
		Policy: pol, Weaken: isolate.Weakening{NoSeccomp: o.NoPolicy},
	}
	t.Limits.Wall = 30 * time.Second
	out := rt.Run(ctx, isolate.Spec{Template: t, Job: isolate.Job{InvocationID: "enclave-probe", Argv: []string{EnclaveProbePath, string(spec)}}})
	if out.Kind != isolate.KindOK {
		st := Fail
		switch {
		case strings.Contains(out.Detail, "BLOCKED"):
			st, rr.Reason = Blocked, out.Detail
		case strings.Contains(out.Detail, runscRootNetNS):
			st, rr.Reason = Blocked, "this runsc cannot drive a network namespace on this kernel: it takes any namespace that has /proc/sys/net/core/rmem_default for the host's (\""+runscRootNetNS+"\"), and Linux 6.x has that file in every namespace; the enclave on gvisor needs a runsc that compares namespace identities"
		}
		rr.Results = append(rr.Results, Result{ID: "enclave/network", Group: "enclave", Status: st,
			Evidence: fmt.Sprintf("probe sandbox: %s: %s %s", out.Kind, out.Detail, strings.TrimSpace(string(out.Stderr)))})
		return rr
	}
	results := map[string]string{}
	if err := json.Unmarshal(out.Output, &results); err != nil {
		rr.Results = append(rr.Results, Result{ID: "enclave/network", Group: "enclave", Status: Fail, Evidence: fmt.Sprintf("probe output: %v", err)})
		return rr
	}
	for _, f := range w.Check(results, enclave.CheckOptions{Policy: !o.NoPolicy, Sandbox: true}) {
		st := Pass
		if !f.Pass {
			st = Fail
		}
		rr.Results = append(rr.Results, Result{ID: "enclave/" + f.ID, Group: "enclave", Status: st, Evidence: f.Detail})
	}
	rr.Results = append(rr.Results, policyResult(probeSpec, results, pol, o.NoPolicy))
	return rr
}

// policyRefuses are the probe's target kinds whose socket the enclave-loop
// policy refuses (EPERM) whatever the address: every family but AF_INET
// and every type but the stream one. tcp targets are judged only when
// their address is IPv6; TCP over IPv4 is the one socket the policy
// allows, and the network layers decide where it goes.
var policyRefuses = map[string]bool{"udp": true, "unix": true, "vsock": true, "raw": true, "packet": true,
	"netlink": true, "vsock-socket": true, "udp-socket": true, "tcp6-socket": true, "unix-socket": true}

// policyResult is enclave/policy: the probe ran under agent-loop.policy
// and every socket that policy must refuse failed with EPERM at socket(2).
func policyResult(spec enclave.ProbeSpec, results map[string]string, pol *policy.Policy, off bool) Result {
	res := Result{ID: "enclave/policy", Group: "enclave", Status: Fail}
	if off {
		res.Evidence = "the probe ran without a seccomp filter (NoPolicy)"
		return res
	}
	var bad []string
	n := 0
	for _, t := range spec.Targets {
		v6 := t.Kind == "tcp" && strings.HasPrefix(t.Addr, "[")
		if !policyRefuses[t.Kind] && !v6 {
			continue
		}
		n++
		if r := results[t.ID]; !strings.HasSuffix(r, ":EPERM") {
			bad = append(bad, t.ID+"="+r)
		}
	}
	if len(bad) > 0 {
		res.Evidence = fmt.Sprintf("under %s (%s) these sockets were not refused with EPERM: %s", pol.Name, pol.Digest(), strings.Join(bad, " "))
		return res
	}
	res.Status = Pass
	res.Evidence = fmt.Sprintf("under %s (scope %s, %s) all %d raw, packet, netlink, vsock, IPv6, UDP and Unix sockets answered EPERM", pol.Name, pol.Scope, pol.Digest(), n)
	return res
}
