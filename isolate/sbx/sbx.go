// Package sbx is the sbx sandbox backend, and it is always blocked. The sbx
// CLI cannot be made to enforce every control the other backends enforce, so
// this package only runs a capability probe that names each missing control.
// Probe always fails, Prepare and Run always fail closed, nothing is ever
// launched, and no other backend is ever chosen in its place.
package sbx

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
)

// Name is the backend's configuration name.
const Name = "sbx"

// ErrBlocked is wrapped by every error this backend returns.
var ErrBlocked = errors.New("sbx: BLOCKED: the sbx runtime cannot enforce every control and is never launched")

// Control is one control every backend must enforce, and the sbx create flag
// that would be needed to enforce it.
type Control struct {
	Name string
	Flag string // "" when no CLI flag can provide it
}

// Controls lists what sbx would need. The flags are what a launch would
// require of `sbx create`; a control without a flag cannot be had at all.
var Controls = []Control{
	{"no network", "--network"},
	{"pids limit", "--pids-limit"},
	{"disk (tmpfs) size limit", "--disk-limit"},
	{"file-size limit (RLIMIT_FSIZE)", "--ulimit-fsize"},
	{"private repository view at /query/repo", "--mount-target"},
	{"memory limit", "--memory"},
	{"cpu limit", "--cpus"},
	{"read-only root filesystem", "--read-only"},
	{"uid 65534", "--user"},
	{"no capabilities", "--cap-drop"},
	{"no-new-privileges", "--security-opt"},
	{"the project's seccomp policy", "--seccomp"},
	{"labels carrying the run and invocation ids", "--label"},
	{"digest-pinned template", "--template"},
	{"host-side no-follow read of /query/out", ""},
}

// Runtime is the blocked sbx backend.
type Runtime struct{ h isolate.HostConfig }

// New returns the sbx runtime. It succeeds so that Probe can report why the
// backend is blocked; it never makes the backend usable.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	return &Runtime{h: h}, nil
}

// Name returns "sbx".
func (r *Runtime) Name() string { return Name }

// Missing runs the capability probe and lists every missing control, one
// operator-readable line each. It never launches a sandbox.
func Missing(ctx context.Context) []string {
	path, err := exec.LookPath("sbx")
	if err != nil {
		out := []string{"sbx CLI: not installed (not on PATH)"}
		for _, c := range Controls {
			out = append(out, c.Name+": unavailable (no sbx CLI)")
		}
		return out
	}
	help, herr := createHelp(ctx, path)
	var out []string
	if herr != nil {
		out = append(out, fmt.Sprintf("sbx CLI at %s: `sbx create --help` failed: %v", path, herr))
	}
	for _, c := range Controls {
		switch {
		case c.Flag == "":
			out = append(out, c.Name+": no sbx mechanism provides it")
		case herr != nil || !strings.Contains(help, c.Flag):
			out = append(out, fmt.Sprintf("%s: `sbx create` has no %s", c.Name, c.Flag))
		}
	}
	return out
}

// createHelp returns `sbx create --help`, bounded in time and size.
func createHelp(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "create", "--help")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.WaitDelay = time.Second
	b, err := cmd.CombinedOutput()
	if len(b) > 64<<10 {
		b = b[:64<<10]
	}
	return string(b), err
}

// Probe always fails. Its error lists every missing control.
func (r *Runtime) Probe(ctx context.Context) error {
	return fmt.Errorf("%w; missing: %s", ErrBlocked, strings.Join(Missing(ctx), "; "))
}

// Prepare always fails closed.
func (r *Runtime) Prepare(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	return nil, ErrBlocked
}

// Run always fails closed with KindLaunchFailed.
func (r *Runtime) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	return isolate.RunWithSandbox(ctx, r, s)
}

// Sweep has nothing to remove: this backend never creates anything.
func (r *Runtime) Sweep(ctx context.Context) error { return nil }

// Usable always reports the block.
func (r *Runtime) Usable() error { return ErrBlocked }

// Close releases nothing.
func (r *Runtime) Close() error { return nil }
