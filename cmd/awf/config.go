package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/awf-project/awf/broker/config"
)

const configValidateUsage = `usage: awf config validate [--config] FILE|-

Loads FILE ("-" for standard input) exactly as awf run does, prints its
warnings and a one-line summary. Exits 0 if it is valid, 1 if not, 2 on
usage errors.
`

const configSchemaUsage = `usage: awf config schema

Prints the JSON Schema of the configuration file.
`

// configSchema implements "awf config schema".
func configSchema(ctx context.Context, e env) int {
	if len(e.args) != 0 {
		fmt.Fprint(e.stderr, configSchemaUsage)
		return 2
	}
	if _, err := e.stdout.Write(config.Schema); err != nil {
		return 1
	}
	return 0
}

// configValidate implements "awf config validate".
func configValidate(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("awf config validate", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, configValidateUsage) }
	path := fs.String("config", "", "configuration file, or - for standard input")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	switch {
	case *path == "" && fs.NArg() == 1:
		*path = fs.Arg(0)
	case *path != "" && fs.NArg() == 0:
	default:
		fmt.Fprint(e.stderr, configValidateUsage)
		return 2
	}
	c, err := config.LoadFile(*path, e.stdin)
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
}
