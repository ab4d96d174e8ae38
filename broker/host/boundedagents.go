package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/staging"
)

// Bounded agents run as a broker of their own (its own seed map, socket,
// invocation count, ledger, runtime and audit file) in the run's broker
// process, as sealed probes do, sharing its lane and the agent's freezer.
// Everything here runs before anything is staged: a run that could never
// launch an enclave never clones anything.

// AgentAuditFile is the bounded-agent broker's audit log in the run's
// audit dir; transcripts go to AgentTranscriptDir beside it.
const (
	AgentAuditFile     = "bounded-agent.jsonl"
	AgentTranscriptDir = "bounded-agent-transcripts"
)

// AgentCLIName is the agent CLI's file name, beside the bounded-query one;
// AgentLoopName is the enclave's loop binary, beside awf.
const (
	AgentCLIName  = "bounded-agent"
	AgentLoopName = "agent-loop"
)

// agentsRunning reports whether the config asks for bounded agents.
func agentsRunning(c *config.Config) bool { return c != nil && c.BoundedAgents.Enabled }

// ErrAgentsNeedQueries is the preflight failure of a run that enables
// bounded agents without bounded queries: the bounded-agent broker lives in
// the run's broker process, which only bounded queries start.
var ErrAgentsNeedQueries = errors.New("boundedAgents needs boundedQueries.enabled: the bounded-agent broker runs in the run's broker process")

// BoundedAgentsWithoutQueries returns ErrAgentsNeedQueries for a config
// that enables bounded agents alone. awf run checks it before choosing a
// run without a broker, so that an enabled subsystem is never dropped.
func BoundedAgentsWithoutQueries(c *config.Config) error {
	if agentsRunning(c) && !c.BoundedQueries.Enabled {
		return ErrAgentsNeedQueries
	}
	return nil
}

// BoundedAgentChecks returns the seed's preflight failures of the
// boundedAgents block, each as "where: what": the API proxy enabled, a
// target for the profile, the model set, a staging credential or local
// sources. With host set it also checks this host: the CLI and the loop
// binary beside awf (binDir), and the enclave runtime's host component.
// The runtime itself is proven by probeEnclaveRuntime, still before
// staging.
func BoundedAgentChecks(c *config.Config, getenv func(string) string, hostChecks bool, binDir string) []string {
	if !agentsRunning(c) {
		return nil
	}
	ba := c.BoundedAgents
	var out []string
	add := func(where, format string, args ...any) {
		out = append(out, where+": "+fmt.Sprintf(format, args...))
	}
	if err := BoundedAgentsWithoutQueries(c); err != nil {
		add("boundedAgents.enabled", "%v", err)
	}
	switch {
	case c.APIProxy == nil:
		add("apiProxy", "bounded agents need the API proxy: the enclave holds no credential and the proxy is its only peer")
	default:
		if _, ok := c.APIProxy.Targets[ba.Profile]; !ok {
			add("apiProxy.targets."+ba.Profile, "boundedAgents.profile is %q but the API proxy has no %s target", ba.Profile, ba.Profile)
		}
	}
	if ba.Model == "" {
		add("boundedAgents.model", "is required: every invocation uses the configured model")
	}
	token := staging.ResolveToken(getenv)
	for i, r := range ba.PrivateRepos {
		if m := RepoSourceCheck(fmt.Sprintf("boundedAgents.privateRepos[%d].source", i), r, token, sourceName(r.Source)); m != "" {
			out = append(out, m)
		}
	}
	if !hostChecks {
		return out
	}
	for _, name := range []string{AgentCLIName, AgentLoopName} {
		p := filepath.Join(binDir, name)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			add("host", "bounded agents: %s %s not found (build it with make build)", name, p)
		}
	}
	bq := c.BoundedQueries
	switch ba.Runtime {
	case "docker":
		sock, from, err := DockerSocket(bq.DockerSocket, getenv("DOCKER_HOST"))
		if err != nil {
			add("boundedAgents.runtime", "%v", err)
		} else if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			add("boundedAgents.runtime", "Docker host must be a local Unix socket: %s (%s) is not one", sock, from)
		}
	case "gvisor":
		if bq.RunscPath == "" {
			if _, err := exec.LookPath("runsc"); err != nil {
				add("boundedAgents.runtime", "runtime gvisor: runsc is not available; no fallback (install runsc or set boundedQueries.runscPath)")
			}
		}
	}
	return out
}

// RepoSourceCheck is the check before staging of one private repository's
// source, as awf run's checks report it: "" when r can be staged, else
// "field: why". A local source ("/…") must be an existing directory; any
// other is fetched, which needs a staging credential (token). from names
// where a fetched source comes from ("GitHub", or its URL).
func RepoSourceCheck(field string, r config.Repo, token, from string) string {
	switch {
	case strings.HasPrefix(r.Source, "/"):
		if fi, err := os.Stat(r.Source); err != nil {
			return fmt.Sprintf("%s: %s cannot be staged: %v", field, r.Repo, err)
		} else if !fi.IsDir() {
			return fmt.Sprintf("%s: %s cannot be staged: %s is not a directory", field, r.Repo, r.Source)
		}
	case token == "":
		return fmt.Sprintf("%s: %s is staged from %s but no staging credential is set (GH_TOKEN or GITHUB_TOKEN)", field, r.Repo, from)
	}
	return ""
}

// preflightAgents is BoundedAgentChecks as Prepare reports it.
func preflightAgents(o Options) error {
	problems := BoundedAgentChecks(o.Config, o.Getenv, true, filepath.Dir(o.CLIBinary))
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("bounded agents: %s", strings.Join(problems, "; "))
}

// agentStateDir is the bounded-agent runtime's own state directory.
func agentStateDir(l Layout) string { return agentPaths(l, "").StateDir }

// agentEnclaveRoot is where the broker builds the loop's minimal root.
func agentEnclaveRoot(l Layout) string { return filepath.Join(l.PrivateRoot, "agent-enclave-root") }

// probeEnclaveRuntime proves, before staging, that boundedAgents.runtime
// can run an enclave here: the runtime's own probe (sbx reports its
// structured list of missing controls), then that it renders enclaves at
// all (enclaveBackend: the seed read-only with no writable copy,
// the read-only task, schema, loop config and loop, the bounded out and
// /tmp tmpfs, and the enclave network). There is never a fallback to
// another runtime, nor to a query sandbox.
func probeEnclaveRuntime(ctx context.Context, s Spec, ba config.BoundedAgents) error {
	dir := agentStateDir(s.Layout)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("bounded agents: %w", err)
	}
	h := s.HostConfig()
	h.StateDir = dir
	if ba.Runtime == "docker" {
		sock, _, err := DockerSocket(s.DockerSocket, "")
		if err == nil {
			h.DockerSocket = sock
		}
	}
	rt, err := runtimes.Open(ba.Runtime, h)
	if err != nil {
		return fmt.Errorf("bounded agents: runtime %s: %w", ba.Runtime, err)
	}
	defer rt.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := rt.Probe(pctx); err != nil {
		return fmt.Errorf("bounded agents: runtime %s cannot enforce every control here; no fallback: %w", ba.Runtime, err)
	}
	if _, ok := rt.(enclaveBackend); !ok {
		return fmt.Errorf("bounded agents: runtime %s cannot run an enclave: it does not render the enclave's read-only layout (%s, %s, %s, %s, %s) and its network; no fallback to a query sandbox",
			ba.Runtime, broker.EnclaveRepoDir, broker.EnclaveTaskPath, broker.EnclaveSchemaPath, broker.EnclaveLoopConfigPath, broker.EnclaveLoopPath)
	}
	return nil
}
