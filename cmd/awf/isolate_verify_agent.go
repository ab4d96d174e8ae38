package main

import (
	"context"
	"fmt"
	"os"

	"github.com/awf-project/awf/broker/agentcheck"
	"github.com/awf-project/awf/isolate/verify"
	"github.com/awf-project/awf/policy"
)

// agentVerify is what "awf isolate verify --agent" needs from the command line.
type agentVerify struct {
	networks     []string
	user         string
	cgroupParent string
	asJSON       bool
	progress     bool
}

// runAgentVerify runs the agent battery on the root filesystem root and
// writes its report.
func runAgentVerify(ctx context.Context, e env, o agentVerify, root string, pol *policy.Policy) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(e.stderr, "awf isolate verify: %v\n", err)
		return 2
	}
	opts := agentcheck.Options{
		Exe: exe, RootFS: root, Policy: pol, CgroupParent: o.cgroupParent,
		Networks: o.networks, AgentUser: o.user,
	}
	if o.progress {
		opts.Progress = func(network string, r verify.Result) {
			fmt.Fprintf(e.stderr, "agent/%-4s %-7s %s: %s\n", network, r.Status, r.ID, r.Evidence)
		}
	}
	rep, err := agentcheck.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf isolate verify: %v\n", err)
		return 2
	}
	if o.asJSON {
		err = rep.WriteJSON(e.stdout)
	} else {
		err = rep.WriteText(e.stdout)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "awf isolate verify: %v\n", err)
		return 2
	}
	return rep.ExitCode()
}

// agentProbes is the hidden mode "awf isolate verify --agent-probes SPEC",
// which the agent battery runs inside the agent shim as the agent user.
func agentProbes(e env) int {
	return agentcheck.ProbeMain(e.args[1:], e.stdin, e.stdout, e.stderr)
}
