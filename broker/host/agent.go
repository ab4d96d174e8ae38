package host

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/awf-project/awf/isolate/ownthread"
	"github.com/awf-project/awf/proto"
)

// AgentStopGrace is how long the agent gets after SIGTERM before SIGKILL:
// short, so that awf ends well inside a job runner's own grace.
const AgentStopGrace = 2 * time.Second

// AgentMayInherit reports whether the variable called name may pass from
// awf's environment to the agent's when bounded queries are enabled. The
// rules are proto's (one list): a GitHub credential or an Actions runtime
// variable never passes, any other credential-looking variable passes only
// when allow names it exactly, and everything else passes.
func AgentMayInherit(name string, allow []string) bool {
	switch proto.ClassifyVariable(name) {
	case proto.NotCredential:
		return true
	case proto.OtherCredential:
		return slices.Contains(allow, name)
	}
	return false
}

// CredentialsToScrub returns the names in environ that the agent may not
// inherit (AgentMayInherit), each once, for staging.ScrubEnviron: awf
// itself holds them no longer than it needs to.
func CredentialsToScrub(environ, allow []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !AgentMayInherit(name, allow) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// AgentEnv builds the agent's environment from the caller's: every variable
// the agent may not inherit (AgentMayInherit with r.EnvAllow) and any stale
// AWF_BOUNDED_QUERY_* removed, the run's variables added, the skill
// directory first on PATH, HOME and USER of the agent user.
func AgentEnv(base []string, r *Run) []string {
	drop := func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		if !AgentMayInherit(name, r.EnvAllow) {
			return true
		}
		return strings.HasPrefix(name, "AWF_BOUNDED_QUERY_") || dropProbeVar(r, name) || dropAgentVar(r.Spec.Agents, name) || name == "PATH" || name == "HOME" || name == "USER" || name == "LOGNAME"
	}
	var env []string
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range base {
		if strings.HasPrefix(kv, "PATH=") {
			path = strings.TrimPrefix(kv, "PATH=")
		}
		if !drop(kv) {
			env = append(env, kv)
		}
	}
	l := r.Layout
	env = append(env, "PATH="+l.SkillDir+":"+path)
	if r.Spec.Kind != KindProbe {
		env = append(env,
			proto.QuerySocketEnv+"="+l.Socket,
			"AWF_BOUNDED_QUERY_SKILL="+l.SkillPath,
			"AWF_BOUNDED_QUERY_REPOS="+strings.Join(r.Repos, ","),
		)
	}
	env = append(env, ProbeEnv(r)...)
	env = append(env, agentEnv(r.Spec.Agents, r.AgentRepos)...)
	home := r.Agent.Home
	if home == "" {
		home = "/"
	}
	env = append(env, "HOME="+home)
	if r.Agent.Name != "" {
		env = append(env, "USER="+r.Agent.Name, "LOGNAME="+r.Agent.Name)
	}
	return env
}

// RunAgent runs argv through the agent shim (exe run --agent-shim …) in new
// mount, pid and IPC namespaces and returns its exit status. When ctx ends
// (SIGINT/SIGTERM to awf) the agent gets SIGTERM, then SIGKILL after a grace.
func RunAgent(ctx context.Context, exe string, a ShimArgs, env, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	args := append([]string{"run", "--agent-shim"}, a.Argv()...)
	args = append(args, "--")
	args = append(args, argv...)
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if a.APIProxyHandoff != nil {
		cmd.ExtraFiles = []*os.File{a.APIProxyHandoff} // the shim's fd 3
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A new IPC namespace too: the host's System V objects and POSIX
		// message queues are not the agent's to see.
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC,
		Pdeathsig:  syscall.SIGKILL,
	}
	// From a thread of its own: the parent-death signal follows the forking
	// thread, which must outlive the agent (see isolate/ownthread).
	done, err := ownthread.Start(cmd)
	if err != nil {
		return 1, fmt.Errorf("agent: start: %w", err)
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(AgentStopGrace)
		select {
		case err = <-done:
		case <-t.C:
			// Killing pid 1 of the namespace kills every agent process.
			_ = cmd.Process.Kill()
			err = <-done
		}
		t.Stop()
	}
	if err == nil {
		return 0, nil
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 1, fmt.Errorf("agent: %w", err)
}
