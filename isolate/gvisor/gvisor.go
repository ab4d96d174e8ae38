// Package gvisor is the gVisor sandbox backend. It launches runsc directly,
// with no container engine: one OCI bundle, one private runsc state root, one
// cgroup and one host workspace per sandbox, all under the runtime's state
// dir and all carrying the run id.
//
// The job's system calls are served by gVisor's user-space kernel (the
// Sentry); the project's seccomp policy is applied inside it with
// --oci-seccomp. /query is a host tmpfs and /query/repo a host overlay over
// the runtime's view of the seed (see workspace.RepoViews), both bound into
// the sandbox and served by the gofer, so /query/out is read from the host
// side without following links. docs/runtimes.md lists what this backend enforces
// differently from the direct one.
package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/cgroupfs"
	"github.com/awf-project/awf/isolate/workspace"
)

// Name is the backend's configuration name.
const Name = "gvisor"

// Runtime is the gvisor backend. It is safe for concurrent use.
type Runtime struct {
	runID    string
	runsc    string // "" when not found; Probe reports it
	runscErr error
	dir      string // StateDir/gvisor
	parent   string // cgroup parent
	cpus     string // HostConfig.SandboxCPUs

	// books keeps the live workspaces, the broken state and the rootfs
	// image store (see rootmount.go).
	books *workspace.Books

	mu       sync.Mutex
	platform string          // chosen by a successful Probe
	unimpl   map[string]bool // system calls the Sentry does not implement
	dev      map[string]bool // seccomp deviations met so far

	// debugArgs are extra runsc flags (--debug, --strace...) that only
	// tests set, to see what a sandbox did; production never sets them.
	debugArgs []string
	// testOnlySharedBinds renders bundles without the exclusive-access
	// hints (hintExclusive), as before them, so that a benchmark can
	// measure both side by side; production never sets it.
	testOnlySharedBinds bool
}

// New returns the gvisor runtime, a *Runtime (nil on error, never a nil
// *Runtime inside the interface). It checks the configuration only; Probe
// proves that runsc works on this host.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	books, err := workspace.OpenBooks(Name, h)
	if err != nil {
		return nil, err
	}
	parent := h.Parent()
	if err := workspace.ValidName(parent); err != nil {
		return nil, fmt.Errorf("gvisor: cgroup parent: %w", err)
	}
	// On a cgroup v2 host whose service manager delegated a subtree to
	// the broker, the parent goes below it, as direct's does.
	if v2, err := cgroupfs.Unified(); err == nil && v2 {
		base, err := cgroupfs.V2Base(true)
		if err != nil {
			return nil, fmt.Errorf("gvisor: cgroup parent: %w", err)
		}
		parent = path.Join(base, parent)
	}
	r := &Runtime{
		runID:  h.RunID,
		dir:    books.Dir(),
		parent: parent,
		cpus:   h.SandboxCPUs,
		books:  books,
	}
	// One copy of each seed per runtime, an overlay per sandbox: the
	// per-sandbox cost does not grow with the repository.
	books.UseRepoViews()
	r.runsc, r.runscErr = findRunsc(h.RunscPath)
	return r, nil
}

// findRunsc resolves the runsc binary.
func findRunsc(p string) (string, error) {
	if p == "" {
		found, err := exec.LookPath("runsc")
		if err != nil {
			return "", fmt.Errorf("runsc is not installed or not on PATH (install gVisor's runsc or set the runsc path): %w", err)
		}
		p = found
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("runsc path %q must be absolute", p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("runsc at %s: %w", p, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("runsc at %s is not an executable file", p)
	}
	return p, nil
}

// Name returns "gvisor".
func (r *Runtime) Name() string { return Name }

// Usable returns nil until a sandbox could not be reclaimed.
func (r *Runtime) Usable() error { return r.books.Usable() }

// Run prepares a sandbox, runs the job and destroys the sandbox. Its
// sandbox is not booted ahead: Exec starts it with the job, a default-argv
// job through the same bootstrap as a prepared sandbox's, handed its
// script without waiting for the bootstrap to be ready for it.
func (r *Runtime) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	return isolate.RunIn(ctx, r, func(ctx context.Context) (isolate.Sandbox, error) {
		sb, err := r.prepareTemplate(ctx, s.Template)
		if err != nil {
			return nil, err
		}
		return sb, nil
	}, s.Job)
}

// Prepare builds a sandbox from t: the host workspace (with the overlay
// over the runtime's view of the repository and the sandbox's own mount of the rootfs image) and the
// cgroup, and boots it: runsc starts the Sentry, the gofer and the
// interpreter, which waits for the script (see sandbox.boot), so that Exec
// only hands the script over. The invocation id, unknown here, is recorded
// in the journal by Exec.
func (r *Runtime) Prepare(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	sb, err := r.prepareTemplate(ctx, t)
	if err != nil {
		return nil, err
	}
	if err := sb.boot(ctx, true); err != nil {
		if derr := sb.Destroy(context.WithoutCancel(ctx)); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	return sb, nil
}

// prepareTemplate is Prepare without the boot: the workspace and the
// cgroup of a sandbox that Exec starts cold (an enclave, another argv).
func (r *Runtime) prepareTemplate(ctx context.Context, t isolate.Template) (*sandbox, error) {
	if err := r.books.Ready(ctx, t, r.ensureProbed); err != nil {
		return nil, err
	}
	var sc *specs.LinuxSeccomp
	if !t.Weaken.NoSeccomp {
		var err error
		oci, err := t.Policy.OCI()
		if err != nil {
			return nil, fmt.Errorf("gvisor: compile seccomp policy %s: %w", t.Policy.Name, err)
		}
		var dev []string
		if sc, dev, err = translateSeccomp(oci, r.unimplemented()); err != nil {
			return nil, fmt.Errorf("gvisor: policy %s: %w", t.Policy.Name, err)
		}
		r.noteDeviations(dev)
	}
	im, err := r.books.RootImage(ctx, t.RootFS)
	if err != nil {
		return nil, err
	}
	return r.prepare(ctx, t, sc, mountRoot(ctx, im))
}

// prepare creates the workspace and the cgroup. setup, when set, runs inside
// the fresh workspace and returns the root to use (Probe builds its own).
func (r *Runtime) prepare(ctx context.Context, t isolate.Template, sc *specs.LinuxSeccomp, setup func(*workspace.Workspace) (string, error)) (*sandbox, error) {
	ws, err := r.books.Create(ctx, t, func(j *workspace.Journal) { j.Cgroup = filepath.Join(r.parent, Name+"-"+j.Name) })
	if err != nil {
		return nil, err
	}
	runID, name := ws.Journal.RunID, ws.Journal.Name
	sb := &sandbox{r: r, t: t, seccomp: sc, runID: runID, name: name, platform: r.currentPlatform(), ws: ws}
	fail := func(err error) (*sandbox, error) {
		if derr := sb.Destroy(context.WithoutCancel(ctx)); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	sb.rootFS = t.RootFS
	if setup != nil {
		if sb.rootFS, err = setup(ws); err != nil {
			return fail(fmt.Errorf("gvisor: %w", err))
		}
	}
	cg, err := newCgroup(ctx, r.parent, Name+"-"+name, r.cpus, t.Limits, t.Weaken)
	if err != nil {
		return fail(fmt.Errorf("gvisor: %w", err))
	}
	sb.cg = cg
	return sb, nil
}

func (r *Runtime) currentPlatform() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.platform
}

func (r *Runtime) unimplemented() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unimpl
}

func (r *Runtime) noteDeviations(dev []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dev == nil {
		r.dev = map[string]bool{}
	}
	for _, d := range dev {
		r.dev[d] = true
	}
}

// Deviations lists, sorted, every way in which the seccomp policies this
// runtime has applied differ from the kernel filter of the direct backend
// (see translateSeccomp). It is for verify reports and the operator.
func (r *Runtime) Deviations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.dev))
	for d := range r.dev {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
