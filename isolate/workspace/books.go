package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/awf-project/awf/isolate"
)

// Books is the bookkeeping of a backend whose sandboxes are workspaces
// under one state directory (gvisor, docker): which workspaces this
// runtime owns right now, so that its Sweep leaves them alone; whether a
// sandbox could not be reclaimed, after which the backend refuses new work
// (a leftover it cannot remove may still hold a job's data); and the
// store of rootfs images, itself a workspace named after the run. The
// backends share it so that they cannot drift in what counts as live,
// broken or swept. It is safe for concurrent use.
type Books struct {
	backend string // names the backend in errors and journals
	dir     string // the backend's state directory
	runID   string

	mu     sync.Mutex
	live   map[string]bool // workspace names not yet destroyed
	broken error           // set once a sandbox could not be reclaimed
	images *RootImages     // nil until the first RootImage

	// useViews makes sandboxes' repositories overlays over views (set
	// before the first Create); views is the store, nil until first use,
	// and viewOf each live sandbox's view.
	useViews bool
	views    *RepoViews
	viewOf   map[string]*RepoView
}

// OpenBooks checks what a workspace backend needs of h (a valid run id,
// an absolute state directory) and returns the books of its workspaces,
// under StateDir/backend.
func OpenBooks(backend string, h isolate.HostConfig) (*Books, error) {
	if err := ValidID("run", h.RunID); err != nil {
		return nil, fmt.Errorf("%s: %w", backend, err)
	}
	if h.StateDir == "" || !filepath.IsAbs(h.StateDir) {
		return nil, fmt.Errorf("%s: state dir %q must be an absolute path", backend, h.StateDir)
	}
	return &Books{backend: backend, dir: filepath.Join(h.StateDir, backend), runID: h.RunID, live: map[string]bool{}, viewOf: map[string]*RepoView{}}, nil
}

// UseRepoViews makes every sandbox's repository an overlay over this
// runtime's view of its seed (see RepoViews) instead of a copy of the seed.
// Call it before the first Create.
func (b *Books) UseRepoViews() { b.useViews = true }

// Dir is the backend's state directory.
func (b *Books) Dir() string { return b.dir }

// Usable returns nil until a sandbox could not be reclaimed.
func (b *Books) Usable() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.broken
}

// MarkBroken makes the backend unusable; the first cause is kept.
func (b *Books) MarkBroken(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.broken == nil {
		b.broken = fmt.Errorf("%s: a sandbox could not be reclaimed: %w", b.backend, err)
	}
}

// SetLive records that workspace name is (or no longer is) this runtime's.
func (b *Books) SetLive(name string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.live[name] = true
	} else {
		delete(b.live, name)
	}
}

// IsLive reports whether workspace name is this runtime's.
func (b *Books) IsLive(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[name]
}

// Leftovers lists the workspaces under the state directory that are not
// this runtime's: what a Sweep removes.
func (b *Books) Leftovers() ([]string, error) {
	names, err := List(b.dir)
	var out []string
	for _, name := range names {
		if !b.IsLive(name) {
			out = append(out, name)
		}
	}
	return out, err
}

// Create makes the workspace of a new sandbox of run t.RunID (the
// runtime's run when empty), live before it exists so that a concurrent
// Sweep cannot take it. fill completes the journal (a container name, a
// cgroup) from the one with the ids set.
func (b *Books) Create(ctx context.Context, t isolate.Template, fill func(*Journal)) (*Workspace, error) {
	runID := t.RunID
	if runID == "" {
		runID = b.runID
	}
	if err := ValidID("run", runID); err != nil {
		return nil, fmt.Errorf("%s: %w", b.backend, err)
	}
	sid, err := NewSandboxID()
	if err != nil {
		return nil, err
	}
	name := runID + "-" + sid
	j := Journal{Backend: b.backend, RunID: runID, SandboxID: sid, Name: name, Created: time.Now().UTC()}
	if fill != nil {
		fill(&j)
	}
	b.SetLive(name, true)
	var view *RepoView
	if b.useViews && t.Repo != "" {
		if view, err = b.repoView(ctx, t.Repo); err != nil {
			b.SetLive(name, false)
			return nil, err
		}
	}
	ws, err := create(ctx, b.dir, j, t.Limits, t.Repo, view.Dir())
	if err != nil {
		b.releaseView(view)
		b.SetLive(name, false)
		return nil, fmt.Errorf("%s: %w", b.backend, err)
	}
	if view != nil {
		b.mu.Lock()
		b.viewOf[name] = view
		b.mu.Unlock()
	}
	return ws, nil
}

// Destroyed closes the books on sandbox name after its teardown: with
// err, the teardown's joined errors, nil it is no longer live; otherwise
// the backend is broken. It returns the teardown's error, wrapped.
func (b *Books) Destroyed(name string, err error) error {
	if err != nil {
		err = fmt.Errorf("%s: destroy %s: %w", b.backend, name, err)
		b.MarkBroken(err)
		return err
	}
	// The view outlives its sandboxes; only its count of users drops. A
	// sandbox that could not be reclaimed keeps its view in use.
	b.mu.Lock()
	view := b.viewOf[name]
	delete(b.viewOf, name)
	b.mu.Unlock()
	b.releaseView(view)
	b.SetLive(name, false)
	return nil
}

// Swept closes the books on a sweep whose joined errors are err: a
// leftover that could not be removed breaks the backend.
func (b *Books) Swept(err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%s: sweep: %w", b.backend, err)
	b.MarkBroken(err)
	return err
}

// Ready is the start of a backend's Prepare: it fails while the backend
// is broken, then proves the backend with probe (once; probe remembers),
// then refuses a template no sandbox may run (CheckTemplate).
func (b *Books) Ready(ctx context.Context, t isolate.Template, probe func(context.Context) error) error {
	if err := b.Usable(); err != nil {
		return err
	}
	if err := probe(ctx); err != nil {
		return err
	}
	return b.CheckTemplate(t)
}

// CheckTemplate refuses a template that no sandbox may run: one without
// a seccomp policy, with invalid limits, or over a rootfs that lacks a
// mount point.
func (b *Books) CheckTemplate(t isolate.Template) error {
	if t.Policy == nil {
		return fmt.Errorf("%s: no seccomp policy: refusing to run without one", b.backend)
	}
	if err := t.Limits.Validate(); err != nil {
		return fmt.Errorf("%s: %w", b.backend, err)
	}
	return b.CheckRootFS(t.RootFS)
}

// CheckRootFS refuses a root that lacks a directory for one of the
// sandbox's mount points: the runtime would otherwise try to create it in
// the shared tree.
func (b *Books) CheckRootFS(root string) error {
	if root == "" || !filepath.IsAbs(root) {
		return fmt.Errorf("%s: rootfs %q must be an absolute path", b.backend, root)
	}
	for _, d := range []string{"/", "/proc", "/dev", "/tmp", "/query", "/query/repo", "/awf"} {
		st, err := os.Lstat(filepath.Join(root, d))
		if err != nil {
			return fmt.Errorf("%s: rootfs %s: mount point %s: %w", b.backend, root, d, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("%s: rootfs %s: mount point %s is not a directory", b.backend, root, d)
		}
	}
	return nil
}

// Warm implements isolate.Warmer for the backend: it builds t.RootFS's
// image and, with repository views, t.Repo's view, so that the first
// Prepare does not pay for them.
func (b *Books) Warm(ctx context.Context, t isolate.Template) error {
	if err := b.Usable(); err != nil {
		return err
	}
	if err := b.CheckRootFS(t.RootFS); err != nil {
		return err
	}
	if _, err := b.RootImage(ctx, t.RootFS); err != nil {
		return err
	}
	if !b.useViews || t.Repo == "" {
		return nil
	}
	v, err := b.repoView(ctx, t.Repo)
	if err != nil {
		return err
	}
	b.releaseView(v)
	return nil
}

// storeOf returns the store in *slot (guarded by b.mu), opened first, by
// open, as a workspace named after the run with suffix: a runtime's store
// is live while the runtime is open, so that Sweep removes only the stores
// of other runs.
func storeOf[S comparable](b *Books, slot *S, suffix string, open func(parent string, j Journal) (S, error)) (S, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var none S
	if *slot == none {
		name := b.runID + suffix
		s, err := open(b.dir, Journal{Backend: b.backend, RunID: b.runID, Name: name, Created: time.Now().UTC()})
		if err != nil {
			return none, fmt.Errorf("%s: %w", b.backend, err)
		}
		*slot, b.live[name] = s, true
	}
	return *slot, nil
}

// repoView acquires this runtime's view of seed from its view store
// (storeOf).
func (b *Books) repoView(ctx context.Context, seed string) (*RepoView, error) {
	views, err := storeOf(b, &b.views, "-views", NewRepoViews)
	if err != nil {
		return nil, err
	}
	v, err := views.Acquire(ctx, seed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.backend, err)
	}
	return v, nil
}

// releaseView counts one user less of v (nil: none).
func (b *Books) releaseView(v *RepoView) {
	if v == nil {
		return
	}
	b.mu.Lock()
	views := b.views
	b.mu.Unlock()
	if views != nil {
		views.Release(v)
	}
}

// CloseViews removes the repository view store. Sandboxes must be
// destroyed first: a view still in use keeps the store, journalled, for a
// later Sweep.
func (b *Books) CloseViews() error {
	return closeStore(b, &b.views, (*RepoViews).Close)
}

// closeStore takes the store out of *slot (guarded by b.mu) and closes it
// within 30 s; a store whose close removed it is no longer live.
func closeStore[S interface {
	comparable
	Dir() string
}](b *Books, slot *S, closeIt func(S, context.Context) (removed bool, err error)) error {
	b.mu.Lock()
	s := *slot
	var none S
	*slot = none
	b.mu.Unlock()
	if s == none {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	removed, err := closeIt(s, ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", b.backend, err)
	}
	if removed {
		b.SetLive(filepath.Base(s.Dir()), false)
	}
	return nil
}

// RootImage returns the verified image of rootfs from the runtime's image
// store (storeOf).
func (b *Books) RootImage(ctx context.Context, rootfs string) (*RootImage, error) {
	images, err := storeOf(b, &b.images, "-rootimg", NewWorkspaceRootImages)
	if err != nil {
		return nil, err
	}
	im, err := images.Image(ctx, rootfs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.backend, err)
	}
	return im, nil
}

// CloseImages removes the rootfs image store. Sandboxes must be destroyed
// first.
func (b *Books) CloseImages() error {
	return closeStore(b, &b.images, func(s *RootImages, ctx context.Context) (bool, error) { return true, s.Close(ctx) })
}
