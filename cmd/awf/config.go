package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/staging"
)

const configValidateUsage = `usage: awf config validate [--preflight] [--config] FILE|-

Loads FILE ("-" for standard input, which must not be a terminal) exactly
as awf run does: JSON for .json, YAML for .yaml and .yml, and otherwise JSON
if the document starts with "{" and YAML if not. Then it runs every
check of awf run that needs no staging: the agent user (exists, not root),
each local source (an existing directory), a staging credential for each
remote source, GITHUB_SERVER_URL. With --preflight it also checks this host
as awf run would: root, the bounded-query CLI next to awf, the configured
root filesystem, and the runtime (the Docker socket from dockerSocket or
DOCKER_HOST, runsc for gvisor). Every problem is reported, one per line,
with its JSON path (and FILE:LINE:COLUMN for a JSON syntax error and for
every YAML problem). Exits 0 if there
is none, 1 if there are any, 2 on usage errors.
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
	if _, err := e.stdout.Write(config.Schema()); err != nil {
		return 1
	}
	return 0
}

// configValidate implements "awf config validate".
func configValidate(ctx context.Context, e env) int {
	fs := e.flags("awf config validate", configValidateUsage)
	path := fs.String("config", "", "configuration file, or - for standard input")
	preflight := fs.Bool("preflight", false, "also check this host as awf run would")
	args := e.args
	// FILE may come before the flags too.
	var first string
	if len(args) > 0 && args[0] != "-" && !strings.HasPrefix(args[0], "-") {
		first, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if first != "" {
		rest = append([]string{first}, rest...)
	}
	switch {
	case *path == "" && len(rest) == 1:
		*path = rest[0]
	case *path != "" && len(rest) == 0:
	default:
		fmt.Fprint(e.stderr, configValidateUsage)
		return 2
	}
	report := func(problems []string) int {
		for _, p := range problems {
			fmt.Fprintf(e.stderr, "awf config validate: %s\n", p)
		}
		fmt.Fprintf(e.stderr, "awf config validate: %d problem(s); awf run would refuse this configuration\n", len(problems))
		return 1
	}
	src, err := config.ReadSource(*path, e.stdin)
	if err != nil {
		return report([]string{err.Error()})
	}
	c, err := config.LoadSource(*path, src)
	if err != nil {
		return report(loadProblems(*path, src, err))
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	exe, _ := os.Executable()
	if problems := runChecks(c, os.Getenv, *preflight, filepath.Join(filepath.Dir(exe), "bounded-query")); len(problems) > 0 {
		return report(problems)
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

// loadProblems splits the loader's error into its problems (a JSON error
// joins them with "; "; a YAML error lists them, each with its place) and
// gives a syntax error its line and column.
func loadProblems(path string, src []byte, err error) []string {
	name := config.DisplayName(path)
	var ye *config.YAMLError
	if errors.As(err, &ye) {
		out := make([]string, 0, len(ye.Problems))
		for _, p := range ye.Problems {
			if p.Line > 0 {
				out = append(out, name+":"+p.String())
			} else {
				out = append(out, p.String())
			}
		}
		return out
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(src, se.Offset)
		return []string{fmt.Sprintf("%s:%d:%d: %v", name, line, col, err)}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		line, col := lineCol(src, int64(len(src)))
		return []string{fmt.Sprintf("%s:%d:%d: %v (the document ends before it is complete)", name, line, col, err)}
	}
	msg := strings.TrimPrefix(err.Error(), "config: ")
	return strings.Split(msg, "; ")
}

// lineCol converts the byte offset where encoding/json's decoder stopped
// (the offending byte, or the start of the offending token) into a 1-based
// line and column.
func lineCol(src []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(src))))
	before := src[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// runChecks are the checks awf run makes before staging, each reported
// with the JSON path (or the environment variable, or "host") it is about.
// The conditions mirror host.Prepare and runPlain; the config tests check
// that the two agree.
func runChecks(c *config.Config, getenv func(string) string, preflight bool, cliBinary string) []string {
	var out []string
	add := func(where, format string, args ...any) {
		out = append(out, where+": "+fmt.Sprintf(format, args...))
	}
	if _, err := host.ResolveAgent(c.Agent.User, getenv); err != nil {
		add("agent.user", "%v", err)
	}
	out = append(out, host.BoundedAgentChecks(c, getenv, preflight, filepath.Dir(cliBinary))...)
	bq := c.BoundedQueries
	if !bq.Enabled {
		return out
	}
	token := staging.ResolveToken(getenv)
	if u := getenv("GITHUB_SERVER_URL"); u != "" {
		if err := staging.ValidateServerURL(u); err != nil {
			add("env GITHUB_SERVER_URL", "%v", err)
		}
	}
	for i, r := range bq.PrivateRepos {
		// The query broker's message names GitHub for any fetched source.
		if m := host.RepoSourceCheck(fmt.Sprintf("boundedQueries.privateRepos[%d].source", i), r, token, "GitHub"); m != "" {
			out = append(out, m)
		}
	}
	if !preflight {
		return out
	}
	if os.Geteuid() != 0 {
		add("host", "awf run must run as root (it builds sandboxes and namespaces)")
	}
	if fi, err := os.Stat(cliBinary); err != nil || !fi.Mode().IsRegular() {
		add("host", "bounded-query CLI %s not found (build it with make build)", cliBinary)
	}
	if bq.RootFS != nil {
		if fi, err := os.Stat(bq.RootFS.Path); err != nil || !fi.IsDir() {
			add("boundedQueries.rootfs.path", "%s is not a directory", bq.RootFS.Path)
		}
	}
	switch bq.Runtime {
	case "docker":
		where := "boundedQueries.dockerSocket"
		if bq.DockerSocket == "" {
			where = "env DOCKER_HOST"
		}
		sock, from, err := host.DockerSocket(bq.DockerSocket, getenv("DOCKER_HOST"))
		if err != nil {
			add(where, "%v", err)
		} else if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			add(where, "Docker host must be a local Unix socket: %s (%s) is not one", sock, from)
		}
	case "gvisor":
		if bq.RunscPath != "" {
			if fi, err := os.Stat(bq.RunscPath); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
				add("boundedQueries.runscPath", "%s is not an executable file", bq.RunscPath)
			}
		} else if _, err := exec.LookPath("runsc"); err != nil {
			add("boundedQueries.runtime", "runtime gvisor: runsc is not available; no fallback (install runsc or set boundedQueries.runscPath)")
		}
	}
	return out
}
