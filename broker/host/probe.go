package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/rootfs"
	"github.com/awf-project/awf/staging"
)

// Sealed probes run as a broker of their own (its own seed map, socket,
// invocation count, runtime and audit file) inside the broker process of
// the run. Sharing the process gives them what every sandbox of the run
// must share: one lane, so that a probe sandbox and a query sandbox never
// run at the same time and cannot signal to each other (invariant 8); the
// agent's freezer; and one teardown, start-up sweep and crash reclamation,
// which already cover every resource that carries the run id. A run with
// only sealed probes (KindProbe) has no query broker: the probe broker is
// the run's one broker, on its main socket, seed map and audit log.

// ProbeAuditFile is the probe broker's audit log in the run's audit dir.
const ProbeAuditFile = "sealed-probe.jsonl"

// ProbeCLIName is the agent CLI's file name, beside the bounded-query one.
const ProbeCLIName = "sealed-probe"

// ProbeSpec is the probe broker's part of the broker spec.
type ProbeSpec struct {
	SideSpec
	MemoryBytes    int64
	TimeoutSeconds int
	MaxInvocations int
}

// probePaths returns where the probe broker of the run of l keeps its files.
func probePaths(l Layout) ProbeSpec {
	return ProbeSpec{SideSpec: sidePaths(l, "probe", "sealed_probe", ProbeCLIName)}
}

// preflightProbes checks the sealedProbes block before anything is staged:
// the run must have bounded queries too (the probe broker lives in their
// broker process), every non-local repository needs the staging credential,
// the CLI must exist and the runtime's host component must be there. The
// runtime itself is proven by prepareProbes before staging.
func preflightProbes(o Options, token string) error {
	sp := o.Config.SealedProbes
	for _, repo := range sp.PrivateRepos {
		if !strings.HasPrefix(repo.Source, "/") && token == "" {
			return fmt.Errorf("sealedProbes: %s is staged from %s but no staging credential is set (GH_TOKEN or GITHUB_TOKEN)", repo.Repo, sourceName(repo.Source))
		}
	}
	cli := filepath.Join(filepath.Dir(o.CLIBinary), ProbeCLIName)
	if fi, err := os.Stat(cli); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("sealedProbes: sealed-probe CLI %s not found (build it with make build)", cli)
	}
	return nil
}

// newProbeSpec is the probe broker's part of the spec of the run of l, as
// the config asks for it; nothing is created yet. The docker runtime's
// socket is the one bounded queries would use.
func newProbeSpec(o Options, l Layout) (*ProbeSpec, error) {
	sp := o.Config.SealedProbes
	p := probePaths(l)
	p.Runtime, p.RunscPath = sp.Runtime, o.Config.BoundedQueries.RunscPath
	p.MemoryBytes, p.TimeoutSeconds, p.MaxInvocations = sp.MemoryBytes, sp.TimeoutSeconds, sp.MaxInvocations
	if sp.Runtime == "docker" {
		sock, from, err := DockerSocket(o.Config.BoundedQueries.DockerSocket, o.Getenv("DOCKER_HOST"))
		if err != nil {
			return nil, fmt.Errorf("sealedProbes: %v", err)
		}
		if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("sealedProbes: Docker host must be a local Unix socket: %s (%s) is not one", sock, from)
		}
		p.DockerSocket = sock
	}
	return &p, nil
}

// prepareProbes proves the probe runtime, stages the probe seeds into their
// own private root, and writes the sealed_probe skill and the CLI. It runs
// inside Prepare after the query side; Prepare's cleanup removes what it
// made on failure (removeFiles releases the probe seeds too).
func (r *Run) prepareProbes(ctx context.Context, o Options, token string) error {
	sp := o.Config.SealedProbes
	p := r.Spec.Probe
	for _, d := range []string{p.PrivateRoot, p.StateDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("sealed probes: %w", err)
		}
	}
	if err := checkProbeRoot(r.Spec.RootFS); err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	// The probe runtime is proven on its own state dir: the runtime the
	// config names, or a preflight failure; never another one.
	ps := r.Spec
	ps.Runtime, ps.RunscPath, ps.DockerSocket = p.Runtime, p.RunscPath, p.DockerSocket
	ps.Layout.StateDir = p.StateDir
	if err := probeRuntime(ctx, ps); err != nil {
		return fmt.Errorf("preflight: sealedProbes: %v", err)
	}
	audit, err := broker.OpenAudit(r.Layout.AuditDir, ProbeAuditFile)
	if err != nil {
		return err
	}
	defer audit.Close()
	repos := make([]staging.Repo, 0, len(sp.PrivateRepos))
	var slugs []string
	for _, rp := range sp.PrivateRepos {
		repos = append(repos, staging.Repo{Slug: rp.Repo, Sensitivity: proto.SensitivitySealed, Source: rp.Source, Ref: rp.Ref})
		slugs = append(slugs, rp.Repo)
	}
	fmt.Fprintf(o.Progress, "awf: staging %d repositories for sealed probes\n", len(repos))
	if _, err := staging.Stage(ctx, staging.Options{
		PrivateRoot: p.PrivateRoot, RunID: r.Layout.RunID, Token: token, Progress: o.Progress,
		ServerURL: o.Getenv("GITHUB_SERVER_URL"), OnEvent: auditStaging(audit),
	}, repos); err != nil {
		return fmt.Errorf("staging (sealed probes): %w", err)
	}
	if err := writeSideIngress(p.SkillPath, broker.ProbeSkill(slugs, sp.TimeoutSeconds, sp.MaxInvocations),
		p.CLIPath, filepath.Join(filepath.Dir(o.CLIBinary), ProbeCLIName)); err != nil {
		return err
	}
	r.ProbeRepos = slugs
	return nil
}

// ProbeEnv is what the agent gets for sealed probes: the socket in the
// variable the reference's client reads, the skill and the repositories.
func ProbeEnv(r *Run) []string {
	var socket, skill string
	repos := r.ProbeRepos
	switch {
	case r.Spec.Kind == KindProbe:
		socket, skill, repos = r.Layout.Socket, probePaths(r.Layout).SkillPath, r.Repos
	case r.Spec.Probe != nil:
		socket, skill = r.Spec.Probe.Socket, r.Spec.Probe.SkillPath
	default:
		return nil
	}
	return []string{
		proto.ProbeSocketEnv + "=" + socket,
		"AWF_SEALED_PROBE_SKILL=" + skill,
		"AWF_SEALED_PROBE_REPOS=" + strings.Join(repos, ","),
	}
}

// dropProbeVar reports whether an inherited variable must not reach the
// agent of r: a stale AWF_SEALED_PROBE_* when this run sets its own.
func dropProbeVar(r *Run, name string) bool {
	return (r.Spec.Probe != nil || r.Spec.Kind == KindProbe) && strings.HasPrefix(name, "AWF_SEALED_PROBE_")
}

// probeServer is the probe broker as Serve runs it.
type probeServer struct{ *sideServer }

// startProbes opens and sweeps the probe runtime, loads the probe seeds,
// and serves the probe broker on its socket, sharing lane and freezer with
// the query broker. The caller stops it with stop.
func startProbes(ctx context.Context, s Spec, pol *policy.Policy, tel *broker.TelemetryLog, lane chan struct{}, freezer broker.Freezer) (*probeServer, error) {
	ss, err := openSide("sealed probes", "probes", s.Layout.AuditDir, ProbeAuditFile)
	if err != nil {
		return nil, err
	}
	ps := &probeServer{ss}
	if err := ps.start(ctx, s, pol, tel, lane, freezer); err != nil {
		ps.failStartup(ctx, err)
		return nil, err
	}
	return ps, nil
}

// start is startProbes once the audit log is open.
func (ps *probeServer) start(ctx context.Context, s Spec, pol *policy.Policy, tel *broker.TelemetryLog, lane chan struct{}, freezer broker.Freezer) error {
	p, l := s.Probe, s.Layout
	seeds, err := ps.openRuntime(ctx, p.PrivateRoot, p.Runtime, p.hostConfig(s))
	if err != nil {
		return err
	}
	limits := isolate.DefaultLimits()
	limits.MemoryBytes = p.MemoryBytes
	limits.Wall = time.Duration(p.TimeoutSeconds) * time.Second
	limits.OutputBytes = proto.MaxProbeResultBytes
	if err := limits.Validate(); err != nil {
		return fmt.Errorf("sealed probes: %w", err)
	}
	tmpl := isolate.Template{RunID: l.RunID, RootFS: s.RootFS, Limits: limits, Policy: pol}
	bs := make([]broker.Seed, 0, len(seeds))
	for _, sd := range seeds {
		if sd.Sensitivity != proto.SensitivitySealed {
			return fmt.Errorf("sealed probes: seed %s has sensitivity %q, not %q", sd.Repo, sd.Sensitivity, proto.SensitivitySealed)
		}
		bs = append(bs, broker.Seed{Repo: sd.Repo, Dir: sd.Dir, Sensitivity: sd.Sensitivity})
		ps.audit.Lifecycle("seed", fmt.Sprintf("repo=%s commit=%s", sd.Repo, sd.Commit))
	}
	if err := warmSeeds(ctx, ps.rt, tmpl, bs); err != nil {
		return fmt.Errorf("sealed probes: %w", err)
	}
	ps.b, err = broker.New(broker.Options{
		Kind: broker.ProbeKind{}, Runtime: ps.rt, Template: tmpl, Seeds: bs,
		MaxInvocations: p.MaxInvocations, Timeout: limits.Wall, Audit: ps.audit, Telemetry: tel,
		Freezer: freezer, Lane: lane,
	})
	if err != nil {
		return fmt.Errorf("sealed probes: %w", err)
	}
	return ps.serve(s, p.SocketDir, p.Socket, p.Runtime, len(bs), p.MaxInvocations)
}

// sweepProbes sweeps the probe runtime of a spec (teardown and crash
// reclamation), when the run had one.
func sweepProbes(ctx context.Context, s Spec) error {
	if s.Probe == nil {
		return nil
	}
	return sweepSide(ctx, "sealed probes: sweep", s.Probe.Runtime, s.Probe.hostConfig(s))
}

// releaseProbeSeeds releases the probe seeds of the run of l, if any.
func releaseProbeSeeds(ctx context.Context, l Layout) error {
	return releaseSideSeeds(ctx, probePaths(l).PrivateRoot)
}

// KindProbe is the Spec.Kind of a probe-only run: sealed probes enabled
// and bounded queries not. Its one broker is the probe broker, on the run's
// main socket, seed map and audit log; there is no query broker, socket,
// skill or CLI. ("" is a bounded-query run, with or without probes beside.)
const KindProbe = "probe"

// probeOnlyFrame returns the block a run is prepared from: the
// boundedQueries block, or, when only sealed probes are enabled, one made
// of the sealedProbes block (its repositories, all sealed, its runtime and
// limits) and the query block's host settings (rootfs, docker socket, runsc
// path), and true.
func probeOnlyFrame(c *config.Config) (config.BoundedQueries, bool) {
	b := c.BoundedQueries
	if b.Enabled || !c.SealedProbes.Enabled {
		return b, false
	}
	sp := c.SealedProbes
	f := config.BoundedQueries{ScriptJob: sp.ScriptJob, RootFS: b.RootFS, DockerSocket: b.DockerSocket, RunscPath: b.RunscPath}
	// A fresh list: the sealedProbes block keeps its own, without sensitivity.
	f.PrivateRepos = make([]config.Repo, 0, len(sp.PrivateRepos))
	for _, r := range sp.PrivateRepos {
		r.Sensitivity = proto.SensitivitySealed
		f.PrivateRepos = append(f.PrivateRepos, r)
	}
	return f, true
}

// AuditFile is the main audit log of a run's broker: the probe broker's
// in a probe-only run, the query broker's otherwise.
func AuditFile(s Spec) string {
	if s.Kind == KindProbe {
		return ProbeAuditFile
	}
	return "bounded-query.jsonl"
}

// checkProbeRoot refuses a sandbox root built before sealed probes: it
// lacks their paths, so every probe would fail.
func checkProbeRoot(root string) error {
	for name, target := range rootfs.Aliases() {
		if t, err := os.Readlink(filepath.Join(root, name)); err != nil || t != target {
			return fmt.Errorf("sealedProbes: the sandbox root %s has no /%s -> %s (it predates sealed probes): rebuild it (awf rootfs build, or remove the cache %s)", root, name, target, DefaultRootFSCache)
		}
	}
	return nil
}

// writeProbeIngress is writeIngress for a probe-only run: the sealed_probe
// skill and CLI, and nothing of bounded queries.
func (r *Run) writeProbeIngress(o Options, bq config.BoundedQueries) error {
	l := r.Layout
	p := probePaths(l)
	if err := mkdirOwned(l.IngressBase, 0o755); err != nil {
		return err
	}
	for _, d := range []string{l.IngressRoot, l.SkillDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("ingress: %w", err)
		}
	}
	return writeSideIngress(p.SkillPath, broker.ProbeSkill(r.Repos, bq.TimeoutSeconds, bq.MaxInvocations),
		p.CLIPath, filepath.Join(filepath.Dir(o.CLIBinary), ProbeCLIName))
}

// probeRunning reports whether the config asks for sealed probes.
func probeRunning(c *config.Config) bool { return c != nil && c.SealedProbes.Enabled }
