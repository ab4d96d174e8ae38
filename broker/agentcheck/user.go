package agentcheck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/awf-project/awf/broker/host"
)

// agentUser resolves the user the probes run as: the named one (through the
// same rule awf run uses, which refuses root), or, when name is "", a
// throwaway system user created for this run. release removes what was
// created and is never nil.
func agentUser(ctx context.Context, name string) (a host.Agent, release func() error, err error) {
	none := func() error { return nil }
	if name != "" {
		a, err = host.ResolveAgent(name, func(string) string { return "" })
		return a, none, err
	}
	tmp := fmt.Sprintf("awf-verify-%d", os.Getpid()%100000)
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(uctx, "useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
		"--shell", "/usr/sbin/nologin", tmp).CombinedOutput()
	if err != nil {
		return a, none, fmt.Errorf("agentcheck: create the agent user %s (or pass --agent-user NAME): %v: %s", tmp, err, strings.TrimSpace(string(out)))
	}
	release = func() error {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(dctx, "userdel", tmp).CombinedOutput(); err != nil {
			return fmt.Errorf("agentcheck: remove the agent user %s: %v: %s", tmp, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	a, err = host.ResolveAgent(tmp, func(string) string { return "" })
	if err != nil {
		_ = release()
		return a, none, err
	}
	return a, release, nil
}
