package agentcheck

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/isolate/verify"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/policy"
)

//go:embed threads.py
var threadsScript []byte

// loadThreads is how many threads the load sandbox starts (threads.py).
const loadThreads = 1000

// agentCgroupSuffix is added to the sandboxes' cgroup parent to name the
// parent of the battery's agent cgroups (host.PlanAgentCgroup then adds
// its own "-agent"): "awf-verify-agent/RUN".
const agentCgroupSuffix = "-verify"

// viewDeadline bounds one battery: the shim, the probes and the sandbox.
const viewDeadline = 5 * time.Minute

// plantedCredentials are set in the environment the agent's is built from,
// one of each class: GitHub (two, one of them host-scoped), Actions
// runtime, and another credential that agent.env.allow does not list.
var plantedCredentials = []string{"GH_TOKEN", "GH_ENTERPRISE_TOKEN", "ACTIONS_RUNTIME_TOKEN", "FOO_API_KEY"}

// Options control Run.
type Options struct {
	// Exe is the awf binary; the shim and the probe mode run from a copy of
	// it that the agent user can execute.
	Exe string
	// RootFS is the verified root filesystem the load sandbox runs on. It is
	// hidden from the agent like a configured root.
	RootFS string
	// Policy is the seccomp policy of the load sandbox (nil = policy.Default()).
	Policy *policy.Policy
	// CgroupParent is the sandboxes' cgroup parent ("" = awf).
	CgroupParent string
	// Networks are the agent.network modes to check, one battery each, in
	// report order (nil = host, then none).
	Networks []string
	// AgentUser names the agent user (a name or uid; never root). "" creates
	// a throwaway system user for the run and removes it afterwards.
	AgentUser string
	// WorkDir is where the fixture is made ("" = the system temporary
	// directory). The agent user must be able to traverse it.
	WorkDir string
	// Progress, when set, is called after each result.
	Progress func(network string, r verify.Result)

	// TestOnlyShim, when set, edits the shim's arguments after they are
	// filled as awf run fills them. It exists only so that this package's
	// tests can remove a control and prove that the probe for it fails;
	// nothing reachable from configuration sets it.
	TestOnlyShim func(*host.ShimArgs)
	// TestOnlyEnv, when set, edits the agent's environment after the
	// credential rules have run. Test only, like TestOnlyShim.
	TestOnlyEnv func([]string) []string
	// TestOnlyShimExe, when set, is the binary started as the shim ("EXE
	// run --agent-shim …") instead of the awf copy, so that a test binary
	// can run the real shim through host.TestOnlyRunShim with one control
	// of the view removed. Test only, like TestOnlyShim.
	TestOnlyShimExe string
	// TestOnlyNoShim runs the probes as the agent user straight on the
	// host, without the shim: the view an agent had before awf built one.
	// Test only, like TestOnlyShim.
	TestOnlyNoShim bool
}

// Run builds the fixture, then runs the battery in an agent view for each
// network mode. It returns an error only when it cannot work at all (not
// root, no agent user, no fixture, no sandbox runtime); everything else is a
// verdict in the report.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("agentcheck: must run as root (it starts the agent shim and a sandbox)")
	}
	if o.Exe == "" || o.RootFS == "" {
		return nil, errors.New("agentcheck: no awf binary or no root filesystem")
	}
	if len(o.Networks) == 0 {
		o.Networks = []string{host.NetworkHost, host.NetworkNone}
	}
	for _, n := range o.Networks {
		if n != host.NetworkHost && n != host.NetworkNone {
			return nil, fmt.Errorf("agentcheck: agent network %q: want %s or %s", n, host.NetworkHost, host.NetworkNone)
		}
	}
	if o.CgroupParent == "" {
		o.CgroupParent = isolate.DefaultCgroupParent
	}
	pol := o.Policy
	if pol == nil {
		if pol, err = policy.Default(); err != nil {
			return nil, fmt.Errorf("agentcheck: default policy: %w", err)
		}
	}
	a, release, err := agentUser(ctx, o.AgentUser)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := release(); rerr != nil && err == nil {
			err = rerr
		}
	}()

	rep = &Report{Version: ReportVersion, Started: time.Now().UTC().Format(time.RFC3339)}
	rep.Host = hostFacts(a)
	for _, n := range o.Networks {
		vr, err := runView(ctx, o, pol, a, n)
		if err != nil {
			return nil, err
		}
		rep.Views = append(rep.Views, vr)
	}
	rep.computeOK()
	return rep, nil
}

// hostFacts describes the host and the agent user.
func hostFacts(a host.Agent) HostFacts {
	h := HostFacts{AgentUID: a.UID, AgentUser: a.Name}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if m, err := cgroupfs.Mode(); err == nil {
		h.CgroupMode = m
	} else {
		h.CgroupMode = "unknown: " + err.Error()
	}
	return h
}

// runView runs the battery once, in an agent view with the given network
// mode, over a fresh fixture and a fresh direct runtime.
func runView(ctx context.Context, o Options, pol *policy.Policy, a host.Agent, network string) (vr ViewReport, err error) {
	t0 := time.Now()
	vr = ViewReport{Network: network}
	ctx, cancel := context.WithTimeout(ctx, viewDeadline)
	defer cancel()

	fx, err := newFixture(o.WorkDir, o.Exe, o.CgroupParent, a)
	if err != nil {
		return vr, err
	}
	defer func() {
		if cerr := fx.close(); cerr != nil && err == nil {
			vr.Results = append(vr.Results, cleanupFail("removing the fixture failed: %v", cerr))
			vr.finish(time.Since(t0))
		}
	}()
	// The agent's own cgroups, made as awf run makes them, which the shim
	// joins before anything else; but below a parent of verify's own
	// (agentCgroupParent), which an awf run starting meanwhile does not
	// sweep. Its sweep would take this run, which holds no lock under the
	// default private base, for a crashed one and kill the probes.
	agentParent := o.CgroupParent + agentCgroupSuffix
	ac, err := host.PlanAgentCgroup(fx.layout.RunID, agentParent)
	if err != nil {
		return vr, fmt.Errorf("agentcheck: %w", err)
	}
	if err := host.CreateAgentCgroup(ctx, ac); err != nil {
		return vr, fmt.Errorf("agentcheck: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := host.RemoveAgentCgroup(rctx, ac); rerr != nil && err == nil {
			vr.Results = append(vr.Results, cleanupFail("removing the agent's cgroups failed: %v", rerr))
			vr.finish(time.Since(t0))
		}
	}()
	// Every awf name must stay out of sight: this battery's agent parent,
	// and awf run's, where other runs' agents live.
	fx.cgroupNames = append(fx.cgroupNames, filepath.Base(filepath.Dir(ac.FreezerDir)), o.CgroupParent+"-agent", fx.layout.RunID)

	// The load sandbox's runtime keeps its state in the run's private root
	// and runs on the sandboxes' CPUs, as the broker's does.
	h := isolate.HostConfig{RunID: "verify-agent-" + randHex(8), StateDir: fx.layout.StateDir, CgroupParent: o.CgroupParent,
		SandboxCPUs: ac.CPUs.Sandbox}
	rt, err := runtimes.Open("direct", h)
	if err != nil {
		return vr, fmt.Errorf("agentcheck: open the direct runtime: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = rt.Close()
		}
	}()
	if err := verify.ProbeRuntime(ctx, rt); err != nil {
		return vr, fmt.Errorf("agentcheck: the direct runtime cannot run here: %w", err)
	}

	shim := shimArgs(fx, a, network, o.RootFS)
	shim.Cgroups = ac.Dirs()
	if o.TestOnlyShim != nil {
		o.TestOnlyShim(&shim)
	}
	env := agentEnv(fx, a)
	if o.TestOnlyEnv != nil {
		env = o.TestOnlyEnv(env)
	}
	spec := Spec{
		Version: specVersion, Hidden: fx.hidden(), EngineSocket: fx.engineSocket,
		BrokerSocket: fx.layout.Socket, BrokerGreeting: fx.greeting,
		Credentials: plantedCredentials, AgentUID: a.UID, Broker: selfMark(),
		CgroupNames: fx.cgroupNames, Network: network,
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return vr, fmt.Errorf("agentcheck: spec: %w", err)
	}
	if err := os.WriteFile(fx.specPath, b, 0o644); err != nil {
		return vr, fmt.Errorf("agentcheck: spec: %w", err)
	}

	load := func() string { return runLoad(ctx, rt, o.RootFS, pol, h.RunID) }
	shimExe := fx.probeBin
	if o.TestOnlyShimExe != "" {
		shimExe = o.TestOnlyShimExe
	}
	results := runProbes(ctx, fx, shimExe, shim, env, load, o.TestOnlyNoShim)
	for _, r := range results {
		if o.Progress != nil {
			o.Progress(network, r)
		}
	}
	vr.Results = results
	closed = true
	if err := rt.Close(); err != nil {
		vr.Results = append(vr.Results, cleanupFail("closing the load sandbox's runtime failed: %v", err))
	}
	vr.finish(time.Since(t0))
	return vr, nil
}

// shimArgs fills the shim's arguments as awf run does for this fixture:
// the private base and ingress, the Hide list from host.AgentHide (the
// private base, the audit archive, the rootfs cache and the configured root,
// the state directory, the configured source, the configured engine socket
// and every other one that exists), the network mode.
func shimArgs(fx *fixture, a host.Agent, network, rootFS string) host.ShimArgs {
	l := fx.layout
	return host.ShimArgs{
		UID: a.UID, GID: a.GID,
		PrivateBase: l.PrivateBase, IngressBase: l.IngressBase, IngressRoot: l.IngressRoot,
		Hide: host.AgentHide(host.HideInputs{
			PrivateBase: l.PrivateBase, AuditArchiveBase: fx.auditBase,
			RootFSCache: fx.rootfsCache, RootFS: rootFS, StateDirs: []string{l.StateDir},
			Sources: []string{fx.source}, DockerSocket: fx.engineSocket, DockerHost: os.Getenv("DOCKER_HOST"),
		}),
		Network: network,
	}
}

// agentEnv builds the agent's environment as awf run does, from this
// process's environment with one credential of each class added.
func agentEnv(fx *fixture, a host.Agent) []string {
	base := os.Environ()
	for _, n := range plantedCredentials {
		base = append(base, n+"=planted-"+randHex(8))
	}
	return host.AgentEnv(base, &host.Run{Layout: fx.layout, Agent: a})
}

// selfMark identifies this process, the broker's stand-in.
func selfMark() ProcessMark {
	m := ProcessMark{HostPID: os.Getpid()}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		m.Comm, m.StartTime, _ = parseStat(string(b))
	}
	return m
}

// runLoad runs the sandbox that starts loadThreads threads and returns ""
// when it did, or why not.
func runLoad(ctx context.Context, rt isolate.Runtime, rootFS string, pol *policy.Policy, runID string) string {
	l := isolate.DefaultLimits()
	l.Pids = loadThreads + 100
	out := rt.Run(ctx, isolate.Spec{
		Template: isolate.Template{RunID: runID, RootFS: rootFS, Limits: l, Policy: pol},
		Job:      isolate.Job{InvocationID: "load-" + randHex(4), Script: threadsScript},
	})
	if out.Kind != isolate.KindOK {
		return fmt.Sprintf("the load sandbox ended %s: %s %s", out.Kind, out.Detail, trimTail(string(out.Stderr), 200))
	}
	var ans struct{ Threads int }
	if err := json.Unmarshal(out.Output, &ans); err != nil || ans.Threads != loadThreads {
		return fmt.Sprintf("the load sandbox answered %q, not %d threads", out.Output, loadThreads)
	}
	return ""
}

// maxCapture bounds what is kept of the probe mode's output.
const maxCapture = 256 << 10

// runProbes starts the probe mode in the shim, runs the load when the probes
// are ready, and turns their report into one result per catalogue entry.
func runProbes(ctx context.Context, fx *fixture, shimExe string, shim host.ShimArgs, env []string, load func() string, noShim bool) []verify.Result {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return failAll(fmt.Sprintf("pipe: %v", err))
	}
	defer stdinR.Close()
	defer stdinW.Close()
	stdout := &workspace.Capture{Max: maxCapture}
	stderr := newWatcher(readyLine)
	argv := []string{fx.probeBin, "isolate", "verify", "--agent-probes", fx.specPath}
	type exit struct {
		code int
		err  error
	}
	done := make(chan exit, 1)
	go func() {
		if noShim {
			code, err := runUnshimmed(ctx, shim, env, argv, stdinR, stdout, stderr)
			done <- exit{code, err}
			return
		}
		code, err := host.RunAgent(ctx, shimExe, shim, env, argv, stdinR, stdout, stderr)
		done <- exit{code, err}
	}()
	var ex exit
	loadErr := "the probes ended before the load ran"
	select {
	case <-stderr.ready:
		loadErr = load()
		word := goLine
		if loadErr != "" {
			word = abortPrefix + strings.ReplaceAll(loadErr, "\n", " ")
		}
		_, _ = io.WriteString(stdinW, word+"\n")
		ex = <-done
	case ex = <-done:
	}
	why := func() string {
		return fmt.Sprintf("exit %d, err %v: %s", ex.code, ex.err, trimTail(stderr.text(), 600))
	}
	if ex.err != nil || ex.code != 0 {
		return failAll("the probe mode did not run in the shim: " + why())
	}
	var pr probeReport
	if err := json.Unmarshal(stdout.Bytes(), &pr); err != nil {
		return failAll(fmt.Sprintf("the probe mode's report is not JSON (%v): %s", err, why()))
	}
	got := map[string]verify.Result{}
	for _, r := range pr.Results {
		got[r.ID] = r
	}
	var out []verify.Result
	for _, p := range catalogue {
		r, ok := got[p.ID]
		if !ok {
			r = agentResult(p.ID, verify.Fail, "the probe mode did not report this probe")
		}
		if p.ID == IDCounters && r.Status == verify.Pass && loadErr != "" {
			r.Status, r.Evidence = verify.Fail, loadErr
		}
		if r.Status == verify.Fail && p.OnFail != "" {
			r.Evidence += " (" + p.OnFail + ")"
		}
		out = append(out, r)
	}
	return out
}

// runUnshimmed runs argv as the agent user in the host's namespaces, for
// TestOnlyNoShim.
func runUnshimmed(ctx context.Context, a host.ShimArgs, env, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: []uint32{}}}
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 1, fmt.Errorf("agentcheck: %w", err)
	}
	return 0, nil
}

// cleanupFail is the result of a cleanup that failed.
func cleanupFail(format string, a ...any) verify.Result {
	return agentResult(IDCleanup, verify.Fail, fmt.Sprintf(format, a...))
}

// failAll is a FAIL of every probe, for a battery that could not run.
func failAll(why string) []verify.Result {
	var out []verify.Result
	for _, p := range catalogue {
		out = append(out, agentResult(p.ID, verify.Fail, why))
	}
	return out
}

// watcher captures a stream, bounded, and closes ready when it sees line.
type watcher struct {
	workspace.Capture
	line  string
	ready chan struct{}

	mu      sync.Mutex // guards pending and seen
	pending []byte
	seen    bool
}

// newWatcher watches for line and keeps up to maxCapture bytes.
func newWatcher(line string) *watcher {
	return &watcher{Capture: workspace.Capture{Max: maxCapture}, line: line, ready: make(chan struct{})}
}

func (w *watcher) Write(p []byte) (int, error) {
	_, _ = w.Capture.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return len(p), nil
	}
	w.pending = append(w.pending, p...)
	sc := bufio.NewScanner(bytes.NewReader(w.pending))
	for sc.Scan() {
		if sc.Text() == w.line {
			w.seen = true
			close(w.ready)
			w.pending = nil
			return len(p), nil
		}
	}
	if i := bytes.LastIndexByte(w.pending, '\n'); i >= 0 {
		w.pending = w.pending[i+1:]
	}
	if len(w.pending) > 4096 {
		w.pending = w.pending[len(w.pending)-4096:]
	}
	return len(p), nil
}

func (w *watcher) text() string { return string(w.Bytes()) }
