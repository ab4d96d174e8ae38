package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/rootfs"
	"github.com/awf-project/awf/staging"
	"golang.org/x/sys/unix"
)

// DefaultRootFSCache is where awf builds and pins its own rootfs when the
// config names none.
const DefaultRootFSCache = "/var/lib/awf/rootfs"

// DefaultDockerSocket is the docker runtime's socket when the config names none.
const DefaultDockerSocket = "/var/run/docker.sock"

// Options control Prepare.
type Options struct {
	Config *config.Config
	// Getenv reads the caller's environment (tokens, SUDO_UID).
	Getenv func(string) string
	// Progress receives operator-readable progress lines.
	Progress io.Writer
	// CLIBinary is the bounded-query binary installed for the agent.
	CLIBinary string
	// Bases; "" means the defaults.
	PrivateBase, IngressBase, AuditArchive, RootFSCache string
	// Workdir is the agent command's working directory (checked for overlap).
	Workdir string
	// RunID is the run's id ("" = a new one): awf run picks it first so
	// that its watchdog knows the run before anything of it exists.
	RunID string
	// PrimaryBackend is where the agent runs (PrimaryHost, the default, or
	// PrimaryExternal), for telemetry.
	PrimaryBackend string
}

// Run is a prepared run: staged seeds, written skill and spec, held lock.
type Run struct {
	Layout Layout
	Agent  Agent
	Spec   Spec
	Seeds  []staging.Seed
	Repos  []string // configured slugs, as written
	// ProbeRepos are the sealedProbes slugs, as written (probe.go).
	ProbeRepos []string
	// AgentRepos are the boundedAgents slugs, as written.
	AgentRepos []string
	// EnvAllow is agent.env.allow: the other credentials the agent keeps.
	EnvAllow []string
	// Network is agent.network ("" means host).
	Network   string
	agentHide []string
	lock      *os.File
	// agentControl is the broker's end of the API proxy's control channel
	// (NewAgentControl), until StartBroker hands it to the broker.
	agentControl *os.File
}

// AgentHide returns what the agent's view covers (ShimArgs.Hide), as
// preflight computed and checked it.
func (r *Run) AgentHide() []string { return slices.Clone(r.agentHide) }

// Prepare runs every preflight check, then stages the repositories, writes
// the broker spec, the skill and the agent CLI, and creates the agent's
// cgroup. On failure it leaves nothing behind.
func Prepare(ctx context.Context, o Options) (r *Run, err error) {
	bq, probeOnly := probeOnlyFrame(o.Config)
	defer func() { preflightTelemetry(o, bq.Runtime, r, err) }()
	pf := func(format string, args ...any) error {
		return fmt.Errorf("preflight: "+format, args...)
	}
	if os.Geteuid() != 0 {
		return nil, pf("awf run must run as root (it builds sandboxes and namespaces)")
	}
	if !bq.Enabled {
		return nil, pf("bounded queries are not enabled")
	}
	agent, err := ResolveAgent(o.Config.Agent.User, o.Getenv)
	if err != nil {
		return nil, pf("%v", err)
	}
	if fi, err := os.Stat(o.CLIBinary); err != nil || !fi.Mode().IsRegular() {
		return nil, pf("bounded-query CLI %s not found (build it with make build)", o.CLIBinary)
	}
	if err := checkWorkingTree(ctx, o, agent); err != nil {
		return nil, err
	}
	token := staging.ResolveToken(o.Getenv)
	if u := o.Getenv("GITHUB_SERVER_URL"); u != "" {
		if err := staging.ValidateServerURL(u); err != nil {
			return nil, pf("GITHUB_SERVER_URL: %v", err)
		}
	}
	for _, repo := range bq.PrivateRepos {
		if !strings.HasPrefix(repo.Source, "/") && token == "" {
			return nil, pf("%s is staged from %s but no staging credential is set (GH_TOKEN or GITHUB_TOKEN)", repo.Repo, sourceName(repo.Source))
		}
	}
	if probeRunning(o.Config) {
		if err := preflightProbes(o, token); err != nil {
			return nil, pf("%v", err)
		}
	}
	if agentsRunning(o.Config) {
		if err := preflightAgents(o); err != nil {
			return nil, pf("%v", err)
		}
	}
	dockerSocket := bq.DockerSocket
	if bq.Runtime == "docker" {
		sock, from, err := DockerSocket(bq.DockerSocket, o.Getenv("DOCKER_HOST"))
		if err != nil {
			return nil, pf("%v", err)
		}
		if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			return nil, pf("%w", runtimeUnavailable{fmt.Errorf("the Docker host must be a local Unix socket: %s (%s) is not one; set boundedQueries.dockerSocket or DOCKER_HOST=unix:///path", sock, from)})
		}
		dockerSocket = sock
	}
	if bq.Runtime == "gvisor" && bq.RunscPath == "" {
		if _, err := exec.LookPath("runsc"); err != nil {
			return nil, pf("%w", runtimeUnavailable{errors.New("runtime gvisor: runsc is not available; no fallback (install runsc or set boundedQueries.runscPath)")})
		}
	}
	runID := o.RunID
	if runID == "" {
		runID = NewRunID()
	}
	l := NewLayout(runID, o.PrivateBase, o.IngressBase, o.AuditArchive)
	hide, err := planAgentHide(o, agent, l)
	if err != nil {
		return nil, pf("%v", err)
	}
	rfs, digest, err := resolveRootFS(ctx, bq.RootFS, o.RootFSCache, o.Progress)
	if err != nil {
		return nil, pf("%v", err)
	}

	// The agent sees its own run's ingress directory, its home and working
	// directory, and the world-writable temporary directories (where it can
	// take a name before awf does).
	visible := []string{l.IngressRoot, "/tmp", "/var/tmp", "/dev/shm"}
	for _, p := range []string{agent.Home, o.Workdir} {
		if filepath.IsAbs(p) && p != "/" {
			visible = append(visible, p)
		}
	}
	if err := staging.CheckPrivateRoot(l.PrivateRoot, visible); err != nil {
		return nil, pf("%v", err)
	}
	if err := mkdirOwned(l.PrivateBase, 0o700); err != nil {
		return nil, pf("%v", err)
	}
	if err := os.Mkdir(l.PrivateRoot, 0o700); err != nil {
		return nil, pf("private root: %v", err)
	}
	r = &Run{Layout: l, Agent: agent, EnvAllow: slices.Clone(o.Config.Agent.EnvAllow), Network: o.Config.Agent.Network, agentHide: hide}
	defer func() {
		if err != nil {
			r.removeFiles(context.WithoutCancel(ctx))
			r = nil
		}
	}()
	r.lock, err = lockRun(l.LockPath)
	if err != nil {
		return r, pf("%v", err)
	}
	spec := Spec{
		Layout: l, Runtime: bq.Runtime, RunscPath: bq.RunscPath, DockerSocket: dockerSocket,
		CgroupParent: isolate.DefaultCgroupParent, RootFS: rfs, RootFSDigest: digest, MemoryBytes: bq.MemoryBytes,
		TimeoutSeconds: bq.TimeoutSeconds, MaxInvocations: bq.MaxInvocations, WarmPool: bq.WarmPool,
		SocketUID: agent.UID, SocketGID: agent.GID, PrimaryBackend: o.PrimaryBackend,
	}
	if spec.AgentCgroup, err = PlanAgentCgroup(l.RunID, spec.CgroupParent); err != nil {
		return r, pf("%v", err)
	}
	if probeOnly {
		spec.Kind = KindProbe
		if err := checkProbeRoot(rfs); err != nil {
			return r, pf("%v", err)
		}
	} else if probeRunning(o.Config) {
		if spec.Probe, err = newProbeSpec(o, l); err != nil {
			return r, pf("%v", err)
		}
	}
	if err := probeRuntime(ctx, spec); err != nil {
		return r, pf("%w", err)
	}
	if agentsRunning(o.Config) {
		if err := probeEnclaveRuntime(ctx, spec, o.Config.BoundedAgents); err != nil {
			return r, pf("%v", err)
		}
		a := newAgentSpec(o.Config, l, filepath.Dir(o.CLIBinary), dockerSocket)
		spec.Agents = &a
	}
	if err := WriteSpec(spec); err != nil {
		return r, err
	}
	r.Spec = spec

	audit, err := broker.OpenAudit(l.AuditDir, AuditFile(spec))
	if err != nil {
		return r, err
	}
	defer audit.Close()
	repos := make([]staging.Repo, 0, len(bq.PrivateRepos))
	for _, p := range bq.PrivateRepos {
		repos = append(repos, staging.Repo{Slug: p.Repo, Sensitivity: p.Sensitivity, Source: p.Source, Ref: p.Ref})
		r.Repos = append(r.Repos, p.Repo)
	}
	fmt.Fprintf(o.Progress, "awf: staging %d repositories\n", len(repos))
	seeds, err := staging.Stage(ctx, staging.Options{
		PrivateRoot: l.PrivateRoot, RunID: l.RunID, Token: token, Progress: o.Progress,
		ServerURL: o.Getenv("GITHUB_SERVER_URL"), OnEvent: auditStaging(audit),
	}, repos)
	if err != nil {
		return r, fmt.Errorf("staging: %w", err)
	}
	r.Seeds = seeds
	if probeOnly {
		err = r.writeProbeIngress(o, bq)
	} else {
		err = r.writeIngress(o.CLIBinary, bq)
	}
	if err != nil {
		return r, err
	}
	if r.Spec.Probe != nil {
		if err := r.prepareProbes(ctx, o, token); err != nil {
			return r, err
		}
	}
	if a := r.Spec.Agents; a != nil {
		aaudit, err := broker.OpenAudit(l.AuditDir, AgentAuditFile)
		if err != nil {
			return r, err
		}
		r.AgentRepos, err = prepareAgents(ctx, o.Config, *a, l.RunID, token, o.Getenv("GITHUB_SERVER_URL"),
			filepath.Join(filepath.Dir(o.CLIBinary), AgentCLIName), aaudit, func(s string) { fmt.Fprint(o.Progress, s) })
		aaudit.Close()
		if err != nil {
			return r, err
		}
	}
	// Last: the agent's cgroup (removed again on its own failure; Teardown
	// removes it otherwise).
	if err := CreateAgentCgroup(ctx, spec.AgentCgroup); err != nil {
		return r, err
	}
	return r, nil
}

func sourceName(s string) string {
	if s == "" {
		return "GitHub"
	}
	return s
}

// resolveRootFS returns the configured rootfs, or builds (once) and pins
// awf's own under cache.
func resolveRootFS(ctx context.Context, pinned *config.RootFS, cache string, progress io.Writer) (string, string, error) {
	if pinned != nil {
		if _, err := rootfs.Verify(ctx, pinned.Path, pinned.Digest); err != nil {
			return "", "", fmt.Errorf("rootfs: %w", err)
		}
		return pinned.Path, pinned.Digest, nil
	}
	if cache == "" {
		cache = DefaultRootFSCache
	}
	dir := filepath.Join(cache, rootfs.CacheName)
	pin := filepath.Join(cache, rootfs.CacheName+".digest")
	if b, err := os.ReadFile(pin); err == nil {
		want := strings.TrimSpace(string(b))
		if _, err := rootfs.Verify(ctx, dir, want); err != nil {
			return "", "", fmt.Errorf("rootfs: cached root no longer matches its pinned digest (remove %s to rebuild): %w", cache, err)
		}
		return dir, want, nil
	}
	if err := mkdirOwned(cache, 0o755); err != nil {
		return "", "", err
	}
	fmt.Fprintf(progress, "awf: building the sandbox root filesystem in %s (once)\n", dir)
	d, err := rootfs.Build(ctx, rootfs.Options{Out: dir})
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pin, []byte(d+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("rootfs: pin digest: %w", err)
	}
	return dir, d, nil
}

// probeRuntime opens the runtime on the run's state dir and proves it can
// enforce every control, before anything is staged.
func probeRuntime(ctx context.Context, s Spec) error {
	rt, err := runtimes.Open(s.Runtime, s.HostConfig())
	if err != nil {
		return runtimeUnavailable{fmt.Errorf("runtime %s: %w", s.Runtime, err)}
	}
	defer rt.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := rt.Probe(pctx); err != nil {
		return runtimeUnavailable{fmt.Errorf("runtime %s cannot enforce every control here; no fallback: %w", s.Runtime, err)}
	}
	return nil
}

// mkdirOwned creates dir (and parents) and insists that it is a real
// root-owned directory that only root can write. Missing parents are made
// 0755 whatever mode is, so that what the agent's view shows above a
// covered directory (an empty tmpfs over the private base, say) does not
// depend on which of awf's directories was created first.
func mkdirOwned(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("%s: %w", filepath.Dir(dir), err)
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s must be a root-owned directory writable only by root", dir)
	}
	return nil
}

// lockRun takes the run's lifetime lock. A later orphan sweep treats a
// private root whose lock it can take as abandoned.
func lockRun(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("run lock %s: %w", path, err)
	}
	return f, nil
}

// writeIngress creates the agent-visible run directory: the skill and the CLI.
func (r *Run) writeIngress(cli string, bq config.BoundedQueries) error {
	l := r.Layout
	if err := mkdirOwned(l.IngressBase, 0o755); err != nil {
		return err
	}
	for _, d := range []string{l.IngressRoot, l.SkillDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("ingress: %w", err)
		}
	}
	var repos []broker.SkillRepo
	for _, p := range bq.PrivateRepos {
		repos = append(repos, broker.SkillRepo{Repo: p.Repo, Sensitivity: p.Sensitivity})
	}
	if err := writeExclusive(l.SkillPath, []byte(broker.SkillWith(repos, bq.TimeoutSeconds, bq.MaxInvocations, broker.SandboxFactsFor(r.Spec.RootFS, bq.MemoryBytes))), 0o644); err != nil {
		return err
	}
	bin, err := os.ReadFile(cli)
	if err != nil {
		return fmt.Errorf("ingress: %w", err)
	}
	return writeExclusive(l.CLIPath, bin, 0o555)
}

func writeExclusive(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// removeFiles releases the seeds and removes the private and ingress roots.
func (r *Run) removeFiles(ctx context.Context) error {
	var errs []error
	l := r.Layout
	if _, err := os.Stat(filepath.Join(l.PrivateRoot, staging.SeedsDirName)); err == nil {
		if err := staging.Release(ctx, l.PrivateRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := releaseProbeSeeds(ctx, l); err != nil {
		errs = append(errs, err)
	}
	if err := releaseAgentSeeds(ctx, l); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(l.IngressRoot); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(l.PrivateRoot); err != nil {
		errs = append(errs, err)
	}
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
	return errors.Join(errs...)
}
