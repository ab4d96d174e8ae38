package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
)

// probeWait bounds Runtime.Probe, which starts a trial sandbox.
const probeWait = 30 * time.Second

// ProbeRuntime asks rt whether it can run here, within the deadline every
// battery of verify's gives it (the sandbox battery, --enclave, the matrix
// and --agent's load sandbox).
func ProbeRuntime(ctx context.Context, rt isolate.Runtime) error {
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	return rt.Probe(pctx)
}

// Options control Run.
type Options struct {
	// Runtimes are the runtimes to verify, in report order (default: direct).
	Runtimes []string
	// Required are the runtimes whose BLOCKED verdict fails the run.
	Required []string
	// Host is the host configuration the runtimes are opened with. RunID is
	// generated; each runtime gets a fresh StateDir of its own below
	// Host.StateDir (default: verify's scratch directory), removed afterwards.
	Host isolate.HostConfig
	// RootFS is the verified root filesystem the sandboxes run on.
	RootFS string
	// Policy is the seccomp policy in use (nil = policy.Default()).
	Policy *policy.Policy
	// PolicyFile is the file Policy was loaded from, hashed into the
	// report's pins ("" = the embedded policy, or a policy built in memory).
	PolicyFile string
	// RootFSDigest is RootFS's digest when the caller already computed it
	// ("" = verify computes it for the pins).
	RootFSDigest string
	// WorkDir is where verify creates its scratch directory ("" = the
	// system temporary directory).
	WorkDir string
	// PrivateRoot is checked for world-writable parents.
	PrivateRoot string
	// Probes, when not empty, selects probes by ID or by prefix ("net/").
	// The runtime checks (filter, seed, leftovers) always run, except the
	// filter checks when no "filter/" entry is selected.
	Probes []string
	// Open opens a runtime (nil = runtimes.Open).
	Open func(name string, h isolate.HostConfig) (isolate.Runtime, error)
	// Progress, when set, is called after each result.
	Progress func(runtime string, r Result)
	// Environ is the environment the host checks scan (nil = os.Environ()).
	Environ []string
	// Configured, when set, adds ConfiguredProbes under these limits (the
	// operator's configuration) to the battery.
	Configured *isolate.Limits
}

// Run checks the host and runs the battery in every requested runtime.
// It returns an error only when verify itself cannot work (no root
// filesystem, no policy, no scratch directory); everything else is a verdict
// in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Runtimes) == 0 {
		o.Runtimes = []string{"direct"}
	}
	if o.Open == nil {
		o.Open = runtimes.Open
	}
	o.Host.CgroupParent = o.Host.Parent()
	if o.RootFS == "" {
		return nil, errors.New("verify: no root filesystem")
	}
	pol := o.Policy
	if pol == nil {
		var err error
		if pol, err = policy.Default(); err != nil {
			return nil, fmt.Errorf("verify: default policy: %w", err)
		}
	}
	arch, err := policy.NativeArch()
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	rep := &Report{Version: ReportVersion, Started: time.Now().UTC().Format(time.RFC3339)}
	pinned := isolate.DefaultLimits()
	if o.Configured != nil {
		pinned = *o.Configured
	}
	rep.Pins = gatherPins(ctx, o, pol, pinned)
	rep.Host, rep.Checks = CheckHost(ctx, HostOptions{
		CgroupParent: o.Host.CgroupParent, RunscPath: o.Host.RunscPath, DockerSocket: o.Host.DockerSocket,
		PrivateRoot: o.PrivateRoot, Environ: o.Environ, SandboxCPUs: o.Host.SandboxCPUs,
	})
	fx, err := newFixture(o.WorkDir)
	if err != nil {
		return nil, err
	}
	defer fx.close()
	battery := Battery()
	if o.Configured != nil {
		battery = append(battery, ConfiguredProbes(*o.Configured)...)
	}
	if err := checkSelection(battery, o.Probes); err != nil {
		return nil, err
	}
	probes := selectProbes(battery, o.Probes)
	withFilter := len(o.Probes) == 0 || slices.ContainsFunc(o.Probes, func(s string) bool { return strings.HasPrefix(s, "filter/") })
	for _, name := range o.Runtimes {
		rr := runRuntime(ctx, name, o, pol, arch, fx, probes, withFilter)
		rr.Required = slices.Contains(o.Required, name)
		rep.Runtimes = append(rep.Runtimes, rr)
	}
	rep.Finished = time.Now().UTC().Format(time.RFC3339)
	rep.computeOK()
	return rep, nil
}

// selectProbes keeps the probes whose ID matches an entry of sel exactly or
// by a prefix that ends in "/".
func selectProbes(all []Probe, sel []string) []Probe {
	if len(sel) == 0 {
		return all
	}
	var out []Probe
	for _, p := range all {
		for _, s := range sel {
			if p.ID == s || strings.HasSuffix(s, "/") && strings.HasPrefix(p.ID, s) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// checkSelection refuses a selection entry that matches no probe, so that a
// typo cannot turn into a run that checks nothing and passes.
func checkSelection(all []Probe, sel []string) error {
	for _, s := range sel {
		if s == filterProbe.ID || s == "filter/" || s == "filter/denylist" {
			continue
		}
		if len(selectProbes(all, []string{s})) == 0 {
			return fmt.Errorf("verify: no probe matches %q", s)
		}
	}
	return nil
}

// blockedReport is the report of a runtime that could not run: every probe
// is BLOCKED with the reason.
func blockedReport(name, reason string, probes []Probe) RuntimeReport {
	rr := RuntimeReport{Name: name, Status: Blocked, Reason: reason}
	for _, p := range probes {
		rr.Results = append(rr.Results, Result{ID: p.ID, Group: p.Group, Status: Blocked, Evidence: reason})
	}
	for _, id := range RuntimeChecks() {
		rr.Results = append(rr.Results, Result{ID: id, Group: strings.Split(id, "/")[0], Status: Blocked, Evidence: reason})
	}
	rr.finish(0)
	return rr
}

// runRuntime opens, probes and exercises one runtime.
func runRuntime(ctx context.Context, name string, o Options, pol *policy.Policy, arch string, fx *fixture, probes []Probe, withFilter bool) RuntimeReport {
	t0 := time.Now()
	tr := traitsFor(name)
	if len(tr.missing) > 0 {
		// A runtime that cannot enforce every control is never opened or
		// run: the report says which controls are missing, one object each.
		reason, cs := tr.blocking(ctx)
		rr := blockedReport(name, reason, probes)
		rr.Controls = cs
		return rr
	}
	// A fresh directory of verify's own, so that removing it afterwards can
	// never touch a broker's state.
	parent := fx.dir
	if o.Host.StateDir != "" {
		parent = o.Host.StateDir
	}
	stateDir, err := os.MkdirTemp(parent, "verify-"+name+"-")
	if err != nil {
		return blockedReport(name, fmt.Sprintf("state directory: %v", err), probes)
	}
	defer os.RemoveAll(stateDir)
	h := o.Host
	h.RunID = "verify-" + randHex(12)
	h.StateDir = stateDir

	rt, err := o.Open(name, h)
	if err != nil {
		return blockedReport(name, err.Error(), probes)
	}
	closed := false
	defer func() {
		if !closed {
			_ = rt.Close()
		}
	}()
	if err := ProbeRuntime(ctx, rt); err != nil {
		return blockedReport(name, err.Error(), probes)
	}

	prm := params{
		Query: isolate.QueryDir, Repo: isolate.RepoDir, Out: isolate.OutputPath, Tmp: "/tmp",
		Errnos:     errnoVocab,
		SeedMarker: fx.seedMarker, SeedValue: fx.seedValue, SeedEntries: fx.seedEntries,
		OtherMarker: fx.otherMarker, SiblingMarker: fx.siblingMarker, SiblingDir: filepath.Base(fx.sibling),
		PlantToken: fx.plantToken, Hostname: fx.hostname,
		HostPrefixes: []string{fx.dir, o.RootFS, stateDir},
		DiskPaths:    diskPaths(),
		HostDisks:    hostDisks(append(engineRoot(ctx, name, o.Host.DockerSocket), "/", stateDir, fx.dir, o.RootFS, os.TempDir(), "/var/tmp")...),
		TCP4Port:     fx.tcp4.port, UDPPort: fx.udp.port, DNSPort: fx.dns.port,
		Abstract:   strings.TrimPrefix(fx.abstract.addr, "@"),
		FloodBytes: floodBytes, BombCap: bombCapBytes, ThreadCap: bombCapThreads,
		TokenNames: proto.CredentialVariableNames(), TokenPrefixes: proto.CredentialVariablePrefixes(),
		TokenSuffixes: proto.CredentialVariableSuffixes(), DevNames: devNames,
	}
	if fx.tcp6 != nil {
		prm.TCP6Port = fx.tcp6.port
	}
	fx.setHostOnly(o.RootFS, stateDir)
	prm.HostOnly = fx.hostOnlyPaths()

	b := &battery{
		name: name, rt: rt, traits: tr, fx: fx, prm: prm, pol: pol, arch: arch,
		base: isolate.Template{RunID: h.RunID, RootFS: o.RootFS, Repo: fx.seed, Limits: isolate.DefaultLimits(), Policy: pol},
		scan: newLeftoverScanner(stateDir, h.RunID, h.CgroupParent, []string{fx.dir, stateDir}),
	}
	if o.Progress != nil {
		b.progress = func(r Result) { o.Progress(name, r) }
	}
	rr := RuntimeReport{Name: name}
	rr.Results = b.runAll(ctx, probes, withFilter)
	closed = true
	if err := rt.Close(); err != nil {
		rr.Results = append(rr.Results, Result{ID: "leftover/close", Group: "leftovers", Status: Fail, Evidence: fmt.Sprintf("closing the runtime failed: %v", err)})
	}
	if ms := b.scan.mountLines(); len(ms) > 0 {
		rr.Results = append(rr.Results, Result{ID: "leftover/close", Group: "leftovers", Status: Fail, Evidence: fmt.Sprintf("%d mounts remain after the runtime closed: %s", len(ms), strings.Join(ms, "; "))})
	}
	rr.finish(time.Since(t0))
	return rr
}

// engineRoot is, for docker, the Engine's data root (GET /info), where it
// keeps every container's root and /etc files: fs/host-disk compares the
// sandbox's mounts with that filesystem too. An Engine that does not answer
// has already made the runtime BLOCKED.
func engineRoot(ctx context.Context, name, sock string) []string {
	if name != "docker" {
		return nil
	}
	info, err := docker.Info(ctx, sock)
	if err != nil || info.RootDir == "" {
		return nil
	}
	return []string{info.RootDir}
}
