package main

import (
	"context"
	"fmt"
)

// cmdIsolate dispatches "awf isolate run|verify|matrix".
func cmdIsolate(ctx context.Context, e env) int {
	if len(e.args) == 0 {
		fmt.Fprintln(e.stderr, "usage: awf isolate run|verify|matrix [ARGS...]")
		return 2
	}
	sub := map[string]command{
		"run":    cmdIsolateRun,    // isolate_run.go
		"verify": cmdIsolateVerify, // isolate_verify.go
		"matrix": cmdIsolateMatrix, // isolate_verify.go
	}[e.args[0]]
	if sub == nil {
		fmt.Fprintf(e.stderr, "awf isolate: unknown subcommand %q\n", e.args[0])
		return 2
	}
	return sub(ctx, env{args: e.args[1:], stdin: e.stdin, stdout: e.stdout, stderr: e.stderr})
}
