package main

import (
	"context"
	"fmt"

	"github.com/awf-project/awf/broker/config"
)

// cmdConfig implements "awf config validate F|-" and "awf config schema".
func cmdConfig(ctx context.Context, e env) int {
	const usageText = "usage: awf config validate [--config] FILE|-\n       awf config schema\n"
	if len(e.args) == 0 {
		fmt.Fprint(e.stderr, usageText)
		return 2
	}
	switch e.args[0] {
	case "schema":
		if len(e.args) != 1 {
			fmt.Fprint(e.stderr, usageText)
			return 2
		}
		if _, err := e.stdout.Write(config.Schema); err != nil {
			return 1
		}
		return 0
	case "validate":
		args := e.args[1:]
		if len(args) == 2 && args[0] == "--config" {
			args = args[1:]
		}
		if len(args) != 1 {
			fmt.Fprint(e.stderr, usageText)
			return 2
		}
		c, err := config.LoadFile(args[0], e.stdin)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf config validate: %v\n", err)
			return 1
		}
		for _, w := range c.Warnings {
			fmt.Fprintf(e.stderr, "warning: %s\n", w)
		}
		b := c.BoundedQueries
		if !b.Enabled {
			fmt.Fprintln(e.stdout, "config ok: bounded queries disabled")
			return 0
		}
		fmt.Fprintf(e.stdout, "config ok: bounded queries enabled, runtime %s, %d repositories, timeout %ds, memory %s, maxInvocations %d\n",
			b.Runtime, len(b.PrivateRepos), b.TimeoutSeconds, b.MemoryLimit, b.MaxInvocations)
		return 0
	default:
		fmt.Fprint(e.stderr, usageText)
		return 2
	}
}
