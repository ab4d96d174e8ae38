package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/staging"
)

const runUsage = `usage: awf run --config FILE|- -- CMD [ARGS...]

Runs CMD as the agent user. With boundedQueries enabled it first runs every
preflight check, stages the private repositories, starts the broker in its
own network namespace, and runs CMD in its own mount and pid namespaces with
the bounded-query CLI on PATH; it tears everything down when CMD exits.
Exit status: CMD's, or 125 when awf itself fails or is interrupted while CMD
would have exited 0.
`

// exitAWF is the exit status of a failure of awf itself (not of CMD).
const exitAWF = 125

// cmdRun implements "awf run".
func cmdRun(ctx context.Context, e env) int {
	if len(e.args) > 0 && e.args[0] == "--agent-shim" {
		return agentShim(e)
	}
	if len(e.args) > 0 && e.args[0] == apiProxyFlag {
		return apiProxyServe(ctx, e)
	}
	if len(e.args) > 0 && e.args[0] == host.WatchdogFlag {
		return watchdogMode(e)
	}
	var cfgPath string
	args := e.args
	for len(args) > 0 && args[0] != "--" {
		if args[0] == "--config" && len(args) > 1 && cfgPath == "" {
			cfgPath, args = args[1], args[2:]
			continue
		}
		fmt.Fprint(e.stderr, runUsage)
		return 2
	}
	if cfgPath == "" || len(args) < 2 {
		fmt.Fprint(e.stderr, runUsage)
		return 2
	}
	argv := args[1:]
	gh := newGitHubActions(os.Getenv, e.stderr)
	// fail reports a failure of awf itself, and annotates it in a GitHub
	// Actions job.
	fail := func(what string, err error) {
		fmt.Fprintf(e.stderr, "awf run: %s%v\n", what, err)
		gh.errorf("awf run", "%s%v", what, err)
	}
	cfg, err := config.LoadPath(cfgPath, e.stdin)
	if err != nil {
		fail("", err)
		return exitAWF
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(e.stderr, "awf: warning: %s\n", w)
	}
	// The model keys are read once, here, and scrubbed below with the rest.
	apiKeys, apiKeyVars, err := apiProxyKeys(cfg)
	if err != nil {
		fail("", err)
		return exitAWF
	}
	if err := host.BoundedAgentsWithoutQueries(cfg); err != nil {
		fail("preflight: ", err)
		return exitAWF
	}
	if !cfg.BoundedQueries.Enabled && !cfg.SealedProbes.Enabled {
		return runPlain(ctx, e, cfg, argv, fail)
	}
	exe, err := os.Executable()
	if err != nil {
		fail("", err)
		return exitAWF
	}
	// The staging credential is read once, then it and every credential the
	// agent may not have are removed from this process's environment (and
	// /proc) before anything long-lived starts.
	token := staging.ResolveToken(os.Getenv)
	if err := staging.ScrubEnviron(append(host.CredentialsToScrub(os.Environ(), cfg.Agent.EnvAllow), apiKeyVars...)...); err != nil {
		fail("", err)
		return exitAWF
	}
	getenv := func(k string) string {
		if k == "GH_TOKEN" {
			return token
		}
		return os.Getenv(k)
	}
	if err := host.StartupSweep(ctx, e.stderr, "awf"); err != nil {
		fail("", err)
		return exitAWF
	}
	wd, _ := os.Getwd()
	// The watchdog first: whatever kills awf from here on, it reclaims the
	// run (host.StartWatchdog).
	runID := host.NewRunID()
	wdog, err := host.StartWatchdog(exe, host.NewLayout(runID, "", "", ""), e.stderr)
	if err != nil {
		fail("", err)
		return exitAWF
	}
	defer wdog.Release()
	stopped := context.AfterFunc(ctx, func() {
		fmt.Fprintln(e.stderr, "awf: interrupted: stopping the agent, killing its running query and tearing down")
	})
	defer stopped()
	r, err := host.Prepare(ctx, host.Options{
		Config: cfg, Getenv: getenv, Progress: e.stderr, Workdir: wd, RunID: runID,
		CLIBinary: filepath.Join(filepath.Dir(exe), "bounded-query"),
	})
	token = ""
	if err != nil {
		fail("", err)
		return exitAWF
	}
	// Bounded agents: the API proxy's control channel, the broker's end at
	// its fd 4 and the proxy's to startAPIProxy.
	var b *host.BrokerProc
	pxControl, err := r.NewAgentControl()
	if err == nil {
		b, err = host.StartBroker(ctx, exe, r, e.stderr)
	}
	if err != nil {
		if pxControl != nil {
			pxControl.Close()
		}
		fail("", err)
		if terr := host.Teardown(ctx, r, nil); terr != nil {
			fail("teardown: ", terr)
		}
		return exitAWF
	}
	fmt.Fprintf(e.stderr, "awf: broker ready (runtime %s, %d repositories); running %s as uid %d\n",
		r.Spec.Runtime, len(r.Seeds), argv[0], r.Agent.UID)
	shim := host.ShimArgs{UID: r.Agent.UID, GID: r.Agent.GID, PrivateBase: r.Layout.PrivateBase,
		IngressBase: r.Layout.IngressBase, IngressRoot: r.Layout.IngressRoot,
		Hide: r.AgentHide(), Network: shimNetwork(r.Network), Cgroups: r.Spec.AgentCgroup.Dirs()}
	px, agentEnv, err := startAPIProxy(ctx, exe, cfg.APIProxy, r, apiKeys, &shim, host.AgentEnv(os.Environ(), r), pxControl, host.EnclaveLimits(cfg), e.stderr)
	apiKeys = nil
	if err != nil {
		fail("", err)
		if terr := host.Teardown(ctx, r, b); terr != nil {
			fail("teardown: ", terr)
		}
		return exitAWF
	}
	host.ThawIfBrokerDies(b, r.Spec.AgentCgroup)
	host.KillSandboxesIfBrokerDies(b, r.Spec.AgentCgroup)
	cancelBroker := context.AfterFunc(ctx, b.Cancel)
	defer cancelBroker()
	code, err := host.RunAgent(ctx, exe, shim, agentEnv, argv, e.stdin, e.stdout, e.stderr)
	if shim.APIProxyHandoff != nil {
		shim.APIProxyHandoff.Close()
	}
	if err != nil {
		fail("", err)
		code = exitAWF
	}
	stopAPIProxy(px, e.stderr)
	terr := host.Teardown(ctx, r, b)
	if s, err := host.Summary(filepath.Join(r.Layout.AuditArchive, host.AuditFile(r.Spec))); err == nil {
		fmt.Fprintf(e.stderr, "awf: audit: %s\nawf: audit log kept in %s\n", s, r.Layout.AuditArchive)
		gh.appendSummary(r.Layout.AuditArchive, host.AuditFile(r.Spec))
	}
	if terr != nil {
		fail("teardown: ", terr)
		if code == 0 {
			code = exitAWF
		}
	}
	// An interrupted run never reports success, even when the agent, thawed
	// after its query was killed, finished its script before the signal
	// reached it: a cancelled CI job did not do its work.
	if ctx.Err() != nil && code == 0 {
		code = exitAWF
	}
	return code
}

// shimNetwork maps agent.network to the shim's value.
func shimNetwork(n string) string {
	if n == config.AgentNetworkNone {
		return host.NetworkNone
	}
	return host.NetworkHost
}

// agentShim is the hidden mode "awf run --agent-shim UID GID PRIV INGRESS ROOT [OPTIONS…] -- CMD…".
func agentShim(e env) int {
	s, argv, err := host.ParseShimCommand(e.args[1:])
	if err != nil {
		fmt.Fprintf(e.stderr, "awf run: %v\n", err)
		return exitAWF
	}
	code, err := host.RunShim(s, argv)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf run: %v\n", err)
	}
	return code
}

// runPlain runs argv as the agent user with nothing staged, when bounded
// queries are disabled.
func runPlain(ctx context.Context, e env, cfg *config.Config, argv []string, fail func(string, error)) int {
	a, err := host.ResolveAgent(cfg.Agent.User, os.Getenv)
	if err != nil {
		fail("", err)
		return exitAWF
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: []uint32{}}}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fail("", err)
	return exitAWF
}
