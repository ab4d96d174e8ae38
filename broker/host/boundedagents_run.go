package host

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/apiproxy"
	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/staging"
)

// The run side of bounded agents: what Prepare stages and writes once the
// enclave runtime is proven, and what the broker process serves. Nothing
// here is reached until a runtime renders enclaves (probeEnclaveRuntime
// stops every run before that); it is the wiring that runtime plugs into.

// The API proxy's control channel is a Capability issuer for the broker.
var _ broker.CapabilityIssuer = (*apiproxy.Control)(nil)

// The agent's variables for bounded agents.
const (
	AgentSkillEnv = "AWF_BOUNDED_AGENT_SKILL"
	AgentReposEnv = "AWF_BOUNDED_AGENT_REPOS"
)

// AgentSpec is the bounded-agent broker's part of a run: the trusted
// config and the paths, nothing from a request.
type AgentSpec struct {
	SideSpec
	// AgentParams are the boundedAgents block's, whole.
	config.AgentParams
	// LoopBinary is the loop, bound read-only into every enclave.
	LoopBinary string
}

// agentPaths returns where the bounded-agent broker of the run of l keeps
// its files; binDir holds awf and the loop.
func agentPaths(l Layout, binDir string) AgentSpec {
	return AgentSpec{SideSpec: sidePaths(l, "agent", "bounded_agent", AgentCLIName), LoopBinary: filepath.Join(binDir, AgentLoopName)}
}

// newAgentSpec renders the boundedAgents block for the run of l.
func newAgentSpec(c *config.Config, l Layout, binDir, dockerSocket string) AgentSpec {
	ba := c.BoundedAgents
	a := agentPaths(l, binDir)
	a.Runtime, a.RunscPath, a.DockerSocket = ba.Runtime, c.BoundedQueries.RunscPath, dockerSocket
	a.AgentParams = ba.AgentParams
	return a
}

// limits are the enclave's limits: memory (swap off), CPU, pids, each
// writable tmpfs, the wall clock and the result cap from the config.
func (a AgentSpec) limits() (isolate.Limits, error) {
	l := isolate.DefaultLimits()
	l.MemoryBytes, l.CPUMilli, l.Pids = a.MemoryBytes, a.CPUMilli, int64(a.PidsLimit)
	l.QueryTmpfsBytes, l.TmpTmpfsBytes = a.TmpfsBytes, a.TmpfsBytes
	l.FileSizeBytes = min(l.FileSizeBytes, a.TmpfsBytes)
	l.Wall = time.Duration(a.TimeoutSeconds) * time.Second
	l.OutputBytes = int64(a.MaxOutputBytes)
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("bounded agents: %w", err)
	}
	return l, nil
}

// kindOptions are the bounded-agent kind's options for this run.
func (a AgentSpec) kindOptions(auditDir string, issuer broker.CapabilityIssuer) (broker.AgentOptions, error) {
	lim, err := a.limits()
	if err != nil {
		return broker.AgentOptions{}, err
	}
	return broker.AgentOptions{
		MaxTaskBytes: a.MaxTaskBytes, MaxOutputBytes: a.MaxOutputBytes,
		Profile: a.Profile, Model: a.Model,
		Proxy:            netipProxy(),
		MaxModelRequests: a.MaxModelRequests, MaxModelTokens: a.MaxModelTokens,
		Timeout: lim.Wall, Limits: lim, LoopBinary: a.LoopBinary, Issuer: issuer,
		TranscriptDir: filepath.Join(auditDir, AgentTranscriptDir),
	}, nil
}

// EnclaveLimits are the widest capability the API proxy's control channel
// may issue for this run's enclaves: the configured model on the profile's
// protocol, the per-invocation request and token caps, and the proxy's body
// caps and deadline.
func EnclaveLimits(c *config.Config) *apiproxy.Limits {
	if !agentsRunning(c) || c.APIProxy == nil {
		return nil
	}
	ba, px := c.BoundedAgents, c.APIProxy
	return &apiproxy.Limits{
		Models:           map[apiproxy.Protocol]string{apiproxy.Protocol(ba.Profile): ba.Model},
		MaxRequests:      ba.MaxModelRequests,
		MaxTokens:        ba.MaxModelTokens,
		MaxRequestBytes:  px.MaxRequestBytes,
		MaxResponseBytes: px.MaxResponseBytes,
		Timeout:          time.Duration(px.TimeoutSeconds) * time.Second,
	}
}

// agentEnv is what the agent gets for bounded agents: the socket the CLI
// reads, the skill, the repositories and the task cap.
func agentEnv(a *AgentSpec, repos []string) []string {
	if a == nil {
		return nil
	}
	return []string{
		proto.AgentSocketEnv + "=" + a.Socket,
		AgentSkillEnv + "=" + a.SkillPath,
		AgentReposEnv + "=" + strings.Join(repos, ","),
		proto.AgentMaxTaskBytesEnv + "=" + strconv.Itoa(a.MaxTaskBytes),
	}
}

// dropAgentVar reports whether an inherited variable must not reach the
// agent: a stale AWF_BOUNDED_AGENT_* when the run sets its own.
func dropAgentVar(a *AgentSpec, name string) bool {
	return a != nil && strings.HasPrefix(name, "AWF_BOUNDED_AGENT_")
}

// prepareAgents stages the agent seeds into their own private root and
// writes the bounded_agent skill and the CLI into the agent's read-only
// skill directory. It runs inside Prepare after the query side, once the
// enclave runtime is proven; Prepare's cleanup removes what it made.
func prepareAgents(ctx context.Context, c *config.Config, a AgentSpec, runID, token, serverURL, cliBinary string, audit *broker.Audit, progress func(string)) ([]string, error) {
	ba := c.BoundedAgents
	for _, d := range []string{a.PrivateRoot, a.StateDir} {
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("bounded agents: %w", err)
		}
	}
	repos := make([]staging.Repo, 0, len(ba.PrivateRepos))
	var slugs []string
	var skill []broker.SkillRepo
	for _, rp := range ba.PrivateRepos {
		repos = append(repos, staging.Repo{Slug: rp.Repo, Sensitivity: rp.Sensitivity, Source: rp.Source, Ref: rp.Ref})
		slugs = append(slugs, rp.Repo)
		skill = append(skill, broker.SkillRepo{Repo: rp.Repo, Sensitivity: rp.Sensitivity})
	}
	progress(fmt.Sprintf("awf: staging %d repositories for bounded agents\n", len(repos)))
	if _, err := staging.Stage(ctx, staging.Options{
		PrivateRoot: a.PrivateRoot, RunID: runID, Token: token, ServerURL: serverURL,
		OnEvent: auditStaging(audit),
	}, repos); err != nil {
		return nil, fmt.Errorf("staging (bounded agents): %w", err)
	}
	if err := writeAgentIngress(a, skill, cliBinary); err != nil {
		return nil, err
	}
	return slugs, nil
}

// writeAgentIngress writes the skill (0644) and the CLI (0555), each
// exclusively, into the agent's read-only skill directory.
func writeAgentIngress(a AgentSpec, repos []broker.SkillRepo, cliBinary string) error {
	s := broker.AgentSkill(repos, broker.AgentSkillOptions{TimeoutSeconds: a.TimeoutSeconds, MaxInvocations: a.MaxInvocations, MaxTaskBytes: a.MaxTaskBytes})
	return writeSideIngress(a.SkillPath, s, a.CLIPath, cliBinary)
}

// newAgentBroker builds the bounded-agent broker on rt, which must run
// enclaves, sharing the run's lane and the agent's freezer, with a warm
// pool of warm enclaves per seed (rt must then prepare enclaves ahead).
func newAgentBroker(s Spec, a AgentSpec, rt isolate.Runtime, seeds []broker.Seed, pol *policy.Policy, audit *broker.Audit, tel *broker.TelemetryLog,
	lane chan struct{}, freezer broker.Freezer, issuer broker.CapabilityIssuer, warm int) (*broker.Broker, error) {
	if _, ok := rt.(broker.EnclaveRunner); !ok {
		return nil, fmt.Errorf("bounded agents: runtime %s cannot run an enclave", rt.Name())
	}
	ko, err := a.kindOptions(s.Layout.AuditDir, issuer)
	if err != nil {
		return nil, err
	}
	k, err := broker.NewAgentKind(ko)
	if err != nil {
		return nil, err
	}
	return broker.New(broker.Options{
		Kind: k, Runtime: rt, Template: isolate.Template{RunID: s.Layout.RunID, RootFS: s.RootFS, Limits: ko.Limits, Policy: pol},
		Seeds: seeds, MaxInvocations: a.MaxInvocations, Timeout: ko.Timeout, Audit: audit, Telemetry: tel,
		Freezer: freezer, Lane: lane, WarmPool: warm,
	})
}

// netipProxy is the proxy's address and port on every enclave link.
func netipProxy() netip.AddrPort { return netip.AddrPortFrom(enclave.ProxyAddr(), enclave.DefaultPort) }

// agentServer is the bounded-agent broker as Serve runs it: a side broker
// that also holds the broker's end of the API proxy's control channel.
type agentServer struct {
	*sideServer
	ctl *apiproxy.Control
}

// startAgents opens and sweeps the enclave runtime, loads the agent seeds
// and serves the bounded-agent broker on its own socket, sharing lane and
// freezer with the query broker. control is the broker's end of the API
// proxy's control channel (it takes it over). The enclaves run on the
// loop's minimal root, built afresh here, through the runtime's RunEnclave
// (backendSandbox): a runtime without one starts nothing.
func startAgents(ctx context.Context, s Spec, a AgentSpec, pol *policy.Policy, tel *broker.TelemetryLog, lane chan struct{},
	freezer broker.Freezer, control *os.File) (*agentServer, error) {
	ss, err := openSide("bounded agents", "invocations", s.Layout.AuditDir, AgentAuditFile)
	if err != nil {
		control.Close()
		return nil, err
	}
	as := &agentServer{sideServer: ss}
	if err := as.start(ctx, s, a, pol, tel, lane, freezer, control); err != nil {
		as.failStartup(ctx, err)
		return nil, err
	}
	return as, nil
}

// start is startAgents once the audit log is open.
func (as *agentServer) start(ctx context.Context, s Spec, a AgentSpec, pol *policy.Policy, tel *broker.TelemetryLog, lane chan struct{},
	freezer broker.Freezer, control *os.File) error {
	ctl, err := apiproxy.NewControl(control)
	if err != nil {
		return fmt.Errorf("bounded agents: %w", err)
	}
	as.ctl, as.release = ctl, func() { ctl.Close() }
	seeds, err := as.openRuntime(ctx, a.PrivateRoot, a.Runtime, a.hostConfig(s))
	if err != nil {
		return err
	}
	root := agentEnclaveRoot(s.Layout)
	if err := os.RemoveAll(root); err != nil {
		return fmt.Errorf("bounded agents: %w", err)
	}
	if err := buildEnclaveRoot(ctx, root); err != nil {
		return err
	}
	loopPolicy, err := policy.AgentLoop()
	if err != nil {
		return fmt.Errorf("bounded agents: %w", err)
	}
	sandbox := backendSandbox(as.rt, root, loopPolicy)
	if sandbox == nil {
		return fmt.Errorf("bounded agents: runtime %s cannot run an enclave", a.Runtime)
	}
	bs := make([]broker.Seed, 0, len(seeds))
	for _, sd := range seeds {
		bs = append(bs, broker.Seed{Repo: sd.Repo, Dir: sd.Dir, Sensitivity: sd.Sensitivity})
		as.audit.Lifecycle("seed", fmt.Sprintf("repo=%s sensitivity=%s commit=%s", sd.Repo, sd.Sensitivity, sd.Commit))
	}
	er := &enclaveRuntime{Runtime: as.rt, runID: s.Layout.RunID, proxy: as.ctl, sandbox: sandbox, newNetwork: enclave.New,
		prepare: backendPrepare(as.rt, root, loopPolicy)}
	warm := a.WarmPool
	if warm > 0 && er.prepare == nil {
		// As sealed probes: this backend prepares every enclave inside
		// its invocation. Said once, at start-up.
		as.audit.Lifecycle(broker.LifecyclePoolFillFailed, fmt.Sprintf("runtime %s prepares no enclave ahead: warmPool %d ignored, every enclave is cold", a.Runtime, warm))
		warm = 0
	}
	if as.b, err = newAgentBroker(s, a, er, bs, pol, as.audit, tel, lane, freezer, as.ctl, warm); err != nil {
		return err
	}
	if err := as.serve(s, a.SocketDir, a.Socket, a.Runtime, len(bs), a.MaxInvocations); err != nil {
		return err
	}
	// The enclaves are prepared once the socket exists, on the lane, one
	// seed per hold, as for the query pool (Serve); a failure leaves that
	// seed's next invocation cold (audited). stop's Close waits for it.
	go func(b *broker.Broker) { _ = b.FillPool(ctx) }(as.b)
	return nil
}

// releaseAgentSeeds releases the bounded-agent seeds, if any were staged.
func releaseAgentSeeds(ctx context.Context, l Layout) error {
	return releaseSideSeeds(ctx, agentPaths(l, "").PrivateRoot)
}

// AgentControlFD is the broker process's descriptor of its end of the API
// proxy's control channel (StartBroker puts it there).
const AgentControlFD = 4

// NewAgentControl creates the API proxy's control channel of a run with
// bounded agents: the run keeps the broker's end for StartBroker, and the
// proxy's end is returned for the API proxy (apiproxy.StartWithControl).
// Without bounded agents it returns nil.
func (r *Run) NewAgentControl() (*os.File, error) {
	if r.Spec.Agents == nil {
		return nil, nil
	}
	if r.agentControl != nil {
		return nil, errors.New("bounded agents: the control channel exists already")
	}
	proxyEnd, brokerEnd, err := apiproxy.NewControlPair()
	if err != nil {
		return nil, fmt.Errorf("bounded agents: %w", err)
	}
	r.agentControl = brokerEnd
	return proxyEnd, nil
}

// sweepAgents sweeps the bounded-agent runtime on its own state dir, then
// the run's enclave networks (namespaces, links, cgroups), leaving every
// other run's: teardown's part for bounded agents.
func sweepAgents(ctx context.Context, s Spec) error {
	a := s.Agents
	if a == nil {
		return nil
	}
	if err := sweepSide(ctx, "teardown sweep (bounded agents)", a.Runtime, a.hostConfig(s)); err != nil {
		return err
	}
	run := s.Layout.RunID
	if err := enclave.SweepRuns(ctx, func(r string) bool { return r != run }); err != nil {
		return fmt.Errorf("teardown sweep (enclaves): %w", err)
	}
	return nil
}
