// Command awf is the operator CLI: it stages private repositories, runs the
// bounded-query broker around an agent command, and offers the schema, policy,
// rootfs and isolate tools that operators and security teams use.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/awf-project/awf/isolate/direct"
)

func init() {
	// libcontainer re-executes this binary as the container init.
	direct.InitIfRequested()
}

// env is what every subcommand gets: arguments and standard streams.
type env struct {
	args   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// command runs one subcommand and returns the process exit status.
type command func(ctx context.Context, e env) int

// commands maps the first argument to its subcommand. Each group lives in its
// own file: schema.go, policy.go, rootfs.go, isolate*.go, run.go.
func commands() map[string]command {
	return map[string]command{
		"schema":  cmdSchema,
		"policy":  cmdPolicy,
		"rootfs":  cmdRootfs,
		"isolate": cmdIsolate,
		"config":  cmdConfig,
		"run":     cmdRun,
		"broker":  cmdBroker,
	}
}

func usage(w io.Writer) {
	names := make([]string, 0)
	for n := range commands() {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "usage: awf COMMAND [ARGS...]\ncommands: %v\n", names)
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	c, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "awf: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c(ctx, env{args: args[1:], stdin: stdin, stdout: stdout, stderr: stderr})
}
