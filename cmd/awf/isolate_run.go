package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/rootfs"
)

const isolateRunUsage = `usage: awf isolate run --repo DIR --schema SCHEMA [--show-output]
                        [--rootfs DIR [--digest D]] [--policy FILE] [--wall DURATION] SCRIPT

Runs SCRIPT (a path, or "-" for standard input) once against a private
writable view of DIR in the real direct sandbox, and prints the outcome kind
and, if /query/out conforms to SCHEMA, its canonical value. SCHEMA is the
schema JSON text, "-" for standard input, or "@PATH". Without --rootfs a
fresh root filesystem is built for the run. --show-output also prints the
exit status, the detail and the captured stdout and stderr: operators only.
Exits 0 when the outcome is ok and the result conforms, 1 otherwise.
`

// cmdIsolateRun implements "awf isolate run".
func cmdIsolateRun(ctx context.Context, e env) int {
	fs := e.flags("awf isolate run", isolateRunUsage)
	repo := fs.String("repo", "", "repository directory (read-only lower layer)")
	schemaArg := fs.String("schema", "", "schema JSON text, - or @PATH")
	show := fs.Bool("show-output", false, "print exit status, detail, stdout and stderr")
	rootDir := fs.String("rootfs", "", "root filesystem (default: build one for this run)")
	digest := fs.String("digest", "", "pinned rootfs digest to check --rootfs against")
	policyFile := fs.String("policy", "", "seccomp policy file (default: the embedded policy)")
	wall := fs.Duration("wall", 0, "wall-clock deadline (default: the standard limit)")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if *repo == "" || *schemaArg == "" || fs.NArg() != 1 {
		fmt.Fprint(e.stderr, isolateRunUsage)
		return 2
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "awf isolate run: "+format+"\n", args...)
		return 1
	}
	schemaText, err := readArgSource(*schemaArg, e.stdin)
	if err != nil {
		return fail("schema: %v", err)
	}
	schema, err := proto.ParseSchema(schemaText)
	if err != nil {
		return fail("schema: %v", err)
	}
	script, err := readScriptArg(fs.Arg(0), e.stdin)
	if err != nil {
		return fail("script: %v", err)
	}
	pol, err := loadRunPolicy(*policyFile)
	if err != nil {
		return fail("policy: %v", err)
	}
	repoDir, err := filepath.Abs(*repo)
	if err != nil {
		return fail("repo: %v", err)
	}
	scratch, err := os.MkdirTemp("", "awf-isolate-run-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(scratch)
	root := *rootDir
	if root == "" {
		root = filepath.Join(scratch, "rootfs")
		// A build takes seconds: say so, as awf run does for its own.
		fmt.Fprintf(e.stderr, "awf: building a root filesystem for this run in %s (--rootfs reuses one)\n", root)
		if _, err := rootfs.Build(ctx, rootfs.Options{Out: root}); err != nil {
			return fail("%v", err)
		}
	} else if _, err := rootfs.Verify(ctx, root, *digest); err != nil {
		return fail("%v", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return fail("rootfs: %v", err)
	}
	runID := fmt.Sprintf("run%d", os.Getpid())
	rt, err := direct.New(isolate.HostConfig{RunID: runID, StateDir: filepath.Join(scratch, "state")})
	if err != nil {
		return fail("%v", err)
	}
	defer rt.Close()
	if err := rt.Probe(ctx); err != nil {
		return fail("%v", err)
	}
	if err := rt.Sweep(ctx); err != nil {
		return fail("%v", err)
	}
	limits := isolate.DefaultLimits()
	if *wall > 0 {
		limits.Wall = *wall
	}
	t0 := time.Now()
	out := rt.Run(ctx, isolate.Spec{
		Template: isolate.Template{RunID: runID, RootFS: root, Repo: repoDir, Limits: limits, Policy: pol},
		Job:      isolate.Job{InvocationID: "cli", Script: script},
	})
	elapsed := time.Since(t0)
	if err := rt.Sweep(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(e.stderr, "awf isolate run: cleanup: %v\n", err)
	}
	fmt.Fprintf(e.stdout, "kind: %s\n", out.Kind)
	code := 1
	if out.Kind == isolate.KindOK {
		canon, err := schema.CheckResult(out.Output)
		if err != nil {
			fmt.Fprintf(e.stdout, "result: invalid: %v\n", err)
		} else {
			fmt.Fprintf(e.stdout, "result: %s\n", canon)
			code = 0
		}
	}
	if *show {
		fmt.Fprintf(e.stdout, "exit: %d %s\ndetail: %s\nelapsed: %v (prepare %v, start %v, run %v, read %v, destroy %v)\n",
			out.ExitCode, out.Signal, out.Detail, elapsed.Round(time.Millisecond), out.Timings.Prepare, out.Timings.Start,
			out.Timings.Run, out.Timings.Read, out.Timings.Destroy)
		fmt.Fprintf(e.stdout, "--- stdout (%d bytes) ---\n%s\n--- stderr (%d bytes) ---\n%s\n", len(out.Stdout), out.Stdout, len(out.Stderr), out.Stderr)
	}
	return code
}

// readArgSource reads a value given as text, "-" (stdin) or "@PATH".
func readArgSource(v string, stdin io.Reader) ([]byte, error) {
	switch {
	case v == "-":
		return io.ReadAll(io.LimitReader(stdin, 1<<20))
	case strings.HasPrefix(v, "@"):
		return os.ReadFile(v[1:])
	}
	return []byte(v), nil
}

// readScriptArg reads the script from a path or "-".
func readScriptArg(v string, stdin io.Reader) ([]byte, error) {
	if v == "-" {
		return io.ReadAll(io.LimitReader(stdin, 1<<20))
	}
	return os.ReadFile(v)
}

// loadRunPolicy loads a policy file or the embedded default.
func loadRunPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return policy.Default()
	}
	return policy.Load(path)
}
