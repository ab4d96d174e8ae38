package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/staging"
	"golang.org/x/sys/unix"
)

const brokerUsage = `usage: awf broker --config FILE|-

Runs the bounded-query broker in the foreground for operators: preflight,
staging, then the broker in its own network namespace. It prints the socket
and the environment to export for the agent user, and tears everything down
on SIGINT/SIGTERM.
`

// cmdBroker implements "awf broker" (and the internal "--serve SPEC" mode
// that is the broker process itself).
func cmdBroker(ctx context.Context, e env) int {
	if len(e.args) == 2 && e.args[0] == "--serve" {
		return brokerServe(ctx, e, e.args[1])
	}
	if len(e.args) != 2 || e.args[0] != "--config" {
		fmt.Fprint(e.stderr, brokerUsage)
		return 2
	}
	cfg, err := config.LoadPath(e.args[1], e.stdin)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(e.stderr, "awf: warning: %s\n", w)
	}
	if !cfg.BoundedQueries.Enabled {
		fmt.Fprintln(e.stderr, "awf broker: boundedQueries.enabled is not true; nothing to serve")
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		return 1
	}
	// As in awf run: the staging credential is read once, then every
	// credential the agent may not have leaves this process's environment.
	token := staging.ResolveToken(os.Getenv)
	if err := staging.ScrubEnviron(host.CredentialsToScrub(os.Environ(), cfg.Agent.EnvAllow)...); err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		return 1
	}
	getenv := func(k string) string {
		if k == "GH_TOKEN" {
			return token
		}
		return os.Getenv(k)
	}
	if err := host.StartupSweep(ctx, e.stderr, "awf broker"); err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		return 1
	}
	r, err := host.Prepare(ctx, host.Options{
		Config: cfg, Getenv: getenv, Progress: e.stderr, PrimaryBackend: host.PrimaryExternal,
		CLIBinary: filepath.Join(filepath.Dir(exe), "bounded-query"),
	})
	token = ""
	if err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		return 1
	}
	b, err := host.StartBroker(ctx, exe, r, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		// What Prepare made must still go; a teardown that fails leaves
		// state for the next orphan sweep, and the operator must know.
		if terr := host.Teardown(context.WithoutCancel(ctx), r, nil); terr != nil {
			fmt.Fprintf(e.stderr, "awf broker: teardown: %v\n", terr)
		}
		return 1
	}
	l := r.Layout
	fmt.Fprintf(e.stdout, "socket: %s\n", l.Socket)
	fmt.Fprintf(e.stdout, "export %s=%s\n", proto.QuerySocketEnv, l.Socket)
	fmt.Fprintf(e.stdout, "export AWF_BOUNDED_QUERY_SKILL=%s\n", l.SkillPath)
	fmt.Fprintf(e.stdout, "export AWF_BOUNDED_QUERY_REPOS=%s\n", strings.Join(r.Repos, ","))
	for _, kv := range host.ProbeEnv(r) {
		fmt.Fprintf(e.stdout, "export %s\n", kv)
	}
	fmt.Fprintf(e.stdout, "export PATH=%s:$PATH\n", l.SkillDir)
	fmt.Fprintf(e.stdout, "# the socket is reachable only by uid %d; press Ctrl-C to stop\n", r.Agent.UID)
	select {
	case <-ctx.Done():
	case <-b.Exited():
		fmt.Fprintln(e.stderr, "awf broker: the broker process ended")
	}
	code := 0
	if err := host.Teardown(context.WithoutCancel(ctx), r, b); err != nil {
		fmt.Fprintf(e.stderr, "awf broker: teardown: %v\n", err)
		code = 1
	}
	if s, err := host.Summary(filepath.Join(l.AuditArchive, "bounded-query.jsonl")); err == nil {
		fmt.Fprintf(e.stderr, "awf: audit: %s\nawf: audit log kept in %s\n", s, l.AuditArchive)
	}
	return code
}

// brokerServe is the broker process: spec from the private root, readiness
// on fd 3.
func brokerServe(ctx context.Context, e env, specPath string) int {
	s, err := host.ReadSpec(specPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		return 1
	}
	// awf passes a pipe as fd 3 for the readiness line; anything else there
	// (an operator running --serve by hand) is left alone.
	var ready *os.File
	var st unix.Stat_t
	if unix.Fstat(3, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		ready = os.NewFile(3, "ready")
	}
	var readyW io.WriteCloser
	if ready != nil {
		readyW = ready
	}
	if err := host.Serve(ctx, s, readyW, e.stderr); err != nil {
		fmt.Fprintf(e.stderr, "awf broker: %v\n", err)
		return 1
	}
	return 0
}
