// Package docker is the optional Docker sandbox backend. It talks to the
// Docker Engine over its Unix socket only (a small net/http client; no SDK,
// never TCP). The verified rootfs is imported with `docker import` as an
// image tagged by the rootfs digest, and its single layer is checked against
// the tar of the directory before use, since no registry is assumed. Each
// job runs in a fresh container with the same controls as the other
// backends; /query is a host tmpfs and /query/repo a host overlay over the
// runtime's view of the seed (see workspace.RepoViews), both from package
// workspace and bound into the container, so /query/out is read on the host
// side without following links.
// Prepare creates the container and Exec only writes the script and
// starts it (see sandbox), so a sandbox held by a warm pool saves its job
// the create. Containers carry labels with the run, sandbox and state-dir
// ids so that Sweep can remove orphans.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// Name is the backend's configuration name.
const Name = "docker"

// Labels on every container.
const (
	labelRun     = "awf.run"
	labelSandbox = "awf.sandbox"
	labelState   = "awf.state"
	labelBackend = "awf.backend"
)

// Runtime is the docker backend. It is safe for concurrent use.
type Runtime struct {
	runID    string
	dir      string // StateDir/docker
	stateTag string // labels this state dir's containers
	eng      *engine
	cpus     string    // HostConfig.SandboxCPUs
	progress io.Writer // HostConfig.Progress; nil means none

	// books keeps the live workspaces, the broken state, the erofs
	// image store of the rootfs (see rootmount.go) and the store of
	// repository views.
	books *workspace.Books

	mu     sync.Mutex
	probed bool              // a Probe succeeded
	images map[string]string // rootfs dir -> verified image id
}

// New returns the docker runtime, a *Runtime (nil on error, never a nil
// *Runtime inside the interface). It checks the configuration only; Probe
// proves that the Engine answers and can run a container under every
// control.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	books, err := workspace.OpenBooks(Name, h)
	if err != nil {
		return nil, err
	}
	// One copy of each seed per runtime, an overlay per sandbox: the
	// per-sandbox cost does not grow with the repository. The Engine binds
	// the overlay, mounted before the container is created (see
	// buildCreate).
	books.UseRepoViews()
	sum := sha256.Sum256([]byte(filepath.Clean(h.StateDir)))
	return &Runtime{
		runID:    h.RunID,
		dir:      books.Dir(),
		stateTag: hex.EncodeToString(sum[:8]),
		eng:      newEngine(h.DockerSocket),
		cpus:     h.SandboxCPUs,
		progress: h.Progress,
		books:    books,
		images:   map[string]string{},
	}, nil
}

// Name returns "docker".
func (r *Runtime) Name() string { return Name }

// Usable returns nil until a sandbox could not be reclaimed.
func (r *Runtime) Usable() error { return r.books.Usable() }

// Run prepares a sandbox, runs the job and destroys the sandbox, as
// isolate.RunWithSandbox does, except that the container is created for
// the job's own argv: a job with another one (verify's, the tests') then
// creates one container, as a default job does.
func (r *Runtime) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	argv := s.Job.Argv
	if len(argv) == 0 {
		argv = isolate.DefaultArgv()
	}
	return isolate.RunIn(ctx, r, func(ctx context.Context) (isolate.Sandbox, error) {
		return r.prepareFor(ctx, s.Template, argv)
	}, s.Job)
}

// Close removes the rootfs image store and the repository views, and
// releases idle connections to the Engine. Sandboxes must be destroyed
// first.
func (r *Runtime) Close() error {
	r.eng.hc.CloseIdleConnections()
	return errors.Join(r.books.CloseImages(), r.books.CloseViews())
}

// Prepare verifies (and if needed imports) the rootfs image, builds the
// host workspace, with the sandbox's own mount of the rootfs, its /tmp and
// the overlay over the runtime's view of the repository (the view is
// copied from the seed once per runtime, by the first Prepare over it or
// by Warm), and creates the container, stopped, for isolate.DefaultArgv.
// What is left for Exec is the script, the start and the wait.
func (r *Runtime) Prepare(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	return r.prepareFor(ctx, t, isolate.DefaultArgv())
}

// prepareFor is Prepare with the container created for argv.
func (r *Runtime) prepareFor(ctx context.Context, t isolate.Template, argv []string) (isolate.Sandbox, error) {
	if err := r.books.Ready(ctx, t, r.ensureProbed); err != nil {
		return nil, err
	}
	seccomp := "seccomp=unconfined"
	if !t.Weaken.NoSeccomp {
		b, err := t.Policy.DockerJSON()
		if err != nil {
			return nil, fmt.Errorf("docker: compile seccomp policy %s: %w", t.Policy.Name, err)
		}
		seccomp = "seccomp=" + string(b)
	}
	image, err := r.image(ctx, t.RootFS)
	if err != nil {
		return nil, fmt.Errorf("docker: rootfs image: %w", err)
	}
	root, err := r.books.RootImage(ctx, t.RootFS)
	if err != nil {
		return nil, err
	}
	return r.prepare(ctx, t, image, seccomp, root, argv)
}

// image returns the verified image of a rootfs directory, once per runtime.
// An import (the first run on an Engine, which takes seconds) is reported
// on the progress writer in one line.
func (r *Runtime) image(ctx context.Context, dir string) (string, error) {
	r.mu.Lock()
	id, ok := r.images[dir]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	id, ref, took, err := r.eng.rootfsImage(ctx, dir)
	if err != nil {
		return "", err
	}
	if took > 0 && r.progress != nil {
		fmt.Fprintf(r.progress, "awf: docker: imported the sandbox root filesystem %s into the Engine as image %s in %.1fs (once: later runs reuse it)\n", dir, ref, took.Seconds())
	}
	r.mu.Lock()
	r.images[dir] = id
	r.mu.Unlock()
	return id, nil
}

// forgetImage drops a cached image id.
func (r *Runtime) forgetImage(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for dir, v := range r.images {
		if v == id {
			delete(r.images, dir)
		}
	}
}

// prepare creates the workspace of a sandbox that will run image, with
// root mounted in it when not nil (the probe runs without one), and its
// /tmp, and creates its container for argv. Whatever fails, or a ctx that
// ends, leaves nothing: Destroy removes the container (waiting out a
// create the Engine finishes after the call gave up) and the workspace.
func (r *Runtime) prepare(ctx context.Context, t isolate.Template, image, seccomp string, root *workspace.RootImage, argv []string) (isolate.Sandbox, error) {
	ws, err := r.books.Create(ctx, t, func(j *workspace.Journal) { j.Container = "awf-" + j.Name })
	if err != nil {
		return nil, err
	}
	runID, name := ws.Journal.RunID, ws.Journal.Name
	sb := &sandbox{r: r, t: t, runID: runID, name: name, image: image, seccomp: seccomp, ws: ws}
	if err := sb.build(ctx, root, argv); err != nil {
		if derr := sb.Destroy(context.WithoutCancel(ctx)); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, fmt.Errorf("docker: %w", err)
	}
	return sb, nil
}

// build is prepare's part inside the workspace: the root mount, the /tmp
// tmpfs (the same for every job: it exists before the container does)
// and the container.
func (s *sandbox) build(ctx context.Context, root *workspace.RootImage, argv []string) error {
	if root != nil {
		if err := s.mountRoot(ctx, root); err != nil {
			return err
		}
	}
	tmp, err := s.ws.MountScratch("tmp", s.t.Limits.TmpTmpfsBytes)
	if err != nil {
		return err
	}
	s.tmp = tmp
	return s.create(ctx, argv)
}
