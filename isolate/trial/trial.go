// Package trial is the probe trial of the container backends (docker and
// gvisor): from Probe, each runs a trivial program that only exits with
// Exit, from a root of its own, under the full set of controls, to prove
// that the host can start a sandbox at all. The two backends wrote the
// same template, root, job and verdict; kept here once, a trial that passes
// on one backend and fails on the other means the hosts differ, not the
// trials.
package trial

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// Exit is the status the trial's program exits with. Any other outcome,
// a zero exit included, fails the trial: only a program that really ran
// can report it.
const Exit = 42

// program is where the trial's program stands in its root.
const program = "/probe"

// mountPoints are the directories a sandbox mounts over in its root.
var mountPoints = []string{"proc", "dev", "tmp", "query", "query/repo", "awf"}

// Template returns the trial's template: the default limits, bounded to
// wall, 64 MiB and 16 tasks. It has no policy and no rootfs: the backend
// brings its own small filter and builds the root with BuildRoot, and it
// calls its own prepare step, because Prepare refuses a template without a
// policy (workspace.Books.CheckTemplate).
func Template(runID string, wall time.Duration) isolate.Template {
	l := isolate.DefaultLimits()
	l.Wall = wall
	l.MemoryBytes = 64 << 20
	l.Pids = 16
	return isolate.Template{RunID: runID, Limits: l}
}

// Job is the trial's job: the program, under the invocation id "probe".
func Job() isolate.Job {
	return isolate.Job{InvocationID: "probe", Argv: []string{program}}
}

// BuildRoot writes the trial's root below dir, creating dir when it does
// not exist: the mount points of a sandbox and, read-only, the program.
func BuildRoot(dir string) error {
	prog, err := workspace.ProbeProgram(Exit)
	if err != nil {
		return err
	}
	for _, d := range append([]string{""}, mountPoints...) {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("probe root: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, program), prog, 0o555); err != nil {
		return fmt.Errorf("probe root: %w", err)
	}
	return nil
}

// Run runs Job in sb, destroys sb (within destroyWithin, even once ctx
// has ended) and checks that the program exited with Exit. A failed
// Destroy is the error: the backend is then unusable anyway.
func Run(ctx context.Context, sb isolate.Sandbox, destroyWithin time.Duration) error {
	o := sb.Exec(ctx, Job())
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyWithin)
	defer cancel()
	if err := sb.Destroy(dctx); err != nil {
		return err
	}
	if o.Kind != isolate.KindNonzeroExit || o.ExitCode != Exit {
		return fmt.Errorf("probe container gave %s (exit %d): %s %s", o.Kind, o.ExitCode, o.Detail, bytes.TrimSpace(o.Stderr))
	}
	return nil
}

// Describe is isolate.Describe for the backends that pass the seccomp
// filter they rendered beside the description (docker's security option,
// gvisor's bundle). A template without a policy is only ever the trial's
// (see Template): it brings its own filter, so its description names none.
// Every other template reaches a sandbox through Prepare, which refuses it
// without a policy, so this opens no way around Describe's own refusal.
func Describe(t isolate.Template, argv []string, cpus string) (*specs.Spec, error) {
	if t.Policy == nil {
		t.Weaken.NoSeccomp = true
	}
	return isolate.Describe(t, isolate.Job{Argv: argv}, isolate.HostConfig{SandboxCPUs: cpus})
}
