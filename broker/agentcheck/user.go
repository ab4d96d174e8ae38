package agentcheck

import (
	"context"
	"fmt"
	"os"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/broker/sysuser"
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
	if err := sysuser.Create(ctx, tmp); err != nil {
		return a, none, fmt.Errorf("agentcheck: the agent user (or pass --agent-user NAME): %w", err)
	}
	release = func() error {
		if err := sysuser.Remove(ctx, tmp); err != nil {
			return fmt.Errorf("agentcheck: the agent user: %w", err)
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
