// Package sbx is the sbx sandbox backend, and it is always blocked. The sbx
// CLI cannot be made to enforce every control the other backends enforce, so
// this package only runs a capability probe that names each missing control.
// Probe always fails, Prepare and Run always fail closed, nothing is ever
// launched, and no other backend is ever chosen in its place.
package sbx

import (
	"context"
	"encoding/json"
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
	// Audited is true when the audited sbx CLI (Docker Sandboxes v0.37.1)
	// provides the control; the others are why sbx is always BLOCKED.
	Audited bool
}

// Controls is the one list of what sbx would need: the capability probe,
// verify's BLOCKED reason and the matrix all read it. The flags are what a
// launch would require of `sbx create`; a control without a flag cannot be
// had at all. It returns a fresh slice each call.
func Controls() []Control {
	return []Control{
		{"no network", "--network", false},
		{"pids limit", "--pids-limit", false},
		{"disk (tmpfs) size limit", "--disk-limit", false},
		{"file-size limit (RLIMIT_FSIZE)", "--ulimit-fsize", false},
		{"private repository view at /query/repo", "--mount-target", false},
		{"memory limit", "--memory", true},
		{"cpu limit", "--cpus", true},
		{"read-only root filesystem", "--read-only", false},
		{"uid 65534", "--user", false},
		{"no capabilities", "--cap-drop", false},
		{"no-new-privileges", "--security-opt", false},
		{"the project's seccomp policy", "--seccomp", false},
		{"labels carrying the run and invocation ids", "--label", false},
		{"digest-pinned template", "--template", false},
		{"host-side no-follow read of /query/out", "", false},
	}
}

// AuditedMissing names the controls the audited sbx CLI does not provide.
func AuditedMissing() []string {
	var out []string
	for _, c := range Controls() {
		if !c.Audited {
			out = append(out, c.Name)
		}
	}
	return out
}

// ControlStatus is one control in the seed's structured form.
type ControlStatus struct {
	Control   string `json:"control"`
	Required  bool   `json:"required"`
	Supported bool   `json:"supported"`
	Evidence  string `json:"evidence"`
}

// Check runs the capability probe and returns one entry per control, every
// one required; it never launches a sandbox. A control is supported only
// when `sbx create --help` names its flag; even then the runtime stays
// BLOCKED while any required control is not.
func Check(ctx context.Context) []ControlStatus {
	path, err := exec.LookPath("sbx")
	controls := Controls()
	out := make([]ControlStatus, 0, len(controls))
	if err != nil {
		for _, c := range controls {
			out = append(out, ControlStatus{Control: c.Name, Required: true, Evidence: "unavailable: the sbx CLI is not installed (not on PATH)"})
		}
		return out
	}
	help, herr := createHelp(ctx, path)
	for _, c := range controls {
		st := ControlStatus{Control: c.Name, Required: true}
		switch {
		case c.Flag == "":
			st.Evidence = "no sbx mechanism provides it"
		case herr != nil:
			st.Evidence = fmt.Sprintf("`%s create --help` failed: %v", path, herr)
		case !strings.Contains(help, c.Flag):
			st.Evidence = fmt.Sprintf("`%s create` has no %s", path, c.Flag)
		default:
			st.Supported = true
			st.Evidence = fmt.Sprintf("`%s create --help` names %s", path, c.Flag)
		}
		out = append(out, st)
	}
	return out
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

// Missing lists every required control Check finds unsupported, one
// operator-readable line each.
func Missing(ctx context.Context) []string {
	var out []string
	for _, st := range Check(ctx) {
		if st.Required && !st.Supported {
			out = append(out, st.Control+": "+st.Evidence)
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

// Probe always fails. Its error carries Check's structured list as JSON,
// one object per control.
func (r *Runtime) Probe(ctx context.Context) error {
	b, err := json.Marshal(Check(ctx))
	if err != nil {
		return fmt.Errorf("%w; controls: %v", ErrBlocked, err)
	}
	return fmt.Errorf("%w; controls: %s", ErrBlocked, b)
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
