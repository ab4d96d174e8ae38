package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/staging"
)

// Repository views: the one store of them, used by every backend whose
// repository is an overlay (gvisor through Books; direct, which journals
// the store in its own journal). A seed is staged root-owned with every
// write bit stripped and must stay so, and an overlay keeps its lower
// layer's owners and modes: over the seed itself, the sandbox user would
// get a repository it can read but not change. Hence a view.
//
// The first sandbox over a seed copies it once per runtime into a view,
// owned by the sandbox user with owner write permission added, in the
// runtime's view store: a workspace named after the run, whose journal is
// written before any view exists, so that a crash leaves a record and the
// backend's Sweep removes the store like any other leftover workspace.
// Each sandbox then gets a host overlayfs at its RepoDir (lower = the view,
// upper and work on a fresh tmpfs of Limits.RepoUpperBytes in its own
// workspace), which the backend binds at /query/repo; direct mounts the
// same overlay itself, inside the sandbox, over RepoView.Dir. Copy-up
// keeps each invocation's changes in its own upper layer; overlayfs never
// writes a lower layer, and the store is 0700 root, so no host user
// reaches a view.
//
// The views live under a bind of the store's directory onto itself with
// noatime, so that reading a view's file through one sandbox's overlay
// leaves no access time for the next sandbox to stat.
//
// Cost: one copy per seed per runtime (in Prepare, or in Warm), the disk
// space of the copy for the life of the runtime, and per sandbox one tmpfs
// and one overlay mount: nothing that grows with the repository.

// viewsFS is the store's noatime bind, holding one directory per view.
const viewsFS = "views"

// OverlayOptions keep a per-invocation overlay simple and safe with an
// untrusted upper layer: no redirects, no metacopy, no index, no xino.
const OverlayOptions = "redirect_dir=off,metacopy=off,index=off,xino=off"

// overlaySource names the repo overlays in the host mount table.
const overlaySource = "awf-repo"

// viewAttempts bounds how often Acquire retries after another caller's
// copy of the same seed failed (for example because its context ended).
const viewAttempts = 3

// viewKey identifies one seed: its path, device, inode and change time, so
// that a seed replaced or changed at the same path gets a new view.
type viewKey struct {
	path      string
	dev, ino  uint64
	ctimeSec  int64
	ctimeNsec int64
}

// RepoView is one runtime's writable-mode copy of one seed.
type RepoView struct {
	key   viewKey
	dir   string        // the copy; the overlays' lower layer
	ready chan struct{} // closed when the copy is done or has failed
	err   error         // set before ready is closed
	refs  int           // sandboxes using the view; guarded by RepoViews.mu
}

// Dir is the view's directory, "" for a nil view.
func (v *RepoView) Dir() string {
	if v == nil {
		return ""
	}
	return v.dir
}

// RepoViews is one runtime's store of repository views. It is safe for
// concurrent use.
type RepoViews struct {
	ws *Workspace

	mu      sync.Mutex
	mounted bool
	closed  bool
	seq     int
	views   map[viewKey]*RepoView
}

// NewRepoViews returns the store that is the workspace parent/j.Name,
// created (journal first) on first use.
func NewRepoViews(parent string, j Journal) (*RepoViews, error) {
	if err := ValidName(j.Name); err != nil {
		return nil, err
	}
	return &RepoViews{ws: &Workspace{Dir: filepath.Join(parent, j.Name), Journal: j}, views: map[viewKey]*RepoView{}}, nil
}

// Dir is the store's workspace directory.
func (s *RepoViews) Dir() string { return s.ws.Dir }

// seedKey stats the seed directory without following a final symlink.
func seedKey(seed string) (viewKey, error) {
	if !filepath.IsAbs(seed) {
		return viewKey{}, fmt.Errorf("seed %q must be an absolute path", seed)
	}
	var st unix.Stat_t
	if err := unix.Lstat(seed, &st); err != nil {
		return viewKey{}, fmt.Errorf("seed %s: %w", seed, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return viewKey{}, fmt.Errorf("seed %s is not a directory", seed)
	}
	return viewKey{path: seed, dev: st.Dev, ino: st.Ino, ctimeSec: st.Ctim.Sec, ctimeNsec: st.Ctim.Nsec}, nil
}

// mountLocked creates the store: its directory and journal, then the
// noatime bind that holds the views. s.mu is held.
func (s *RepoViews) mountLocked() error {
	if s.mounted {
		return nil
	}
	if err := s.ws.createStore(); err != nil {
		return fmt.Errorf("workspace: repo views: %w", err)
	}
	fs := s.ws.Path(viewsFS)
	if err := os.Mkdir(fs, 0o700); err != nil {
		return fmt.Errorf("workspace: repo views: %w", err)
	}
	if err := unix.Mount(fs, fs, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("workspace: bind repo views %s: %w", fs, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOATIME | unix.MS_NOSUID | unix.MS_NODEV)
	if err := unix.Mount("", fs, "", flags, ""); err != nil {
		return fmt.Errorf("workspace: remount repo views %s noatime: %w", fs, err)
	}
	s.mounted = true
	return nil
}

// Acquire returns the view of seed, copying the seed on first use, and
// counts one more user of it. Each successful call must be paired with
// Release.
func (s *RepoViews) Acquire(ctx context.Context, seed string) (*RepoView, error) {
	seed = filepath.Clean(seed)
	for attempt := 1; ; attempt++ {
		key, err := seedKey(seed)
		if err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("workspace: repo views closed")
		}
		if err := s.mountLocked(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		v, found := s.views[key]
		if !found {
			s.seq++
			v = &RepoView{key: key, dir: filepath.Join(s.ws.Path(viewsFS), strconv.Itoa(s.seq)), ready: make(chan struct{})}
			s.views[key] = v
		}
		v.refs++
		s.mu.Unlock()
		if !found {
			v.err = v.build(ctx)
			if v.err != nil {
				s.mu.Lock()
				delete(s.views, key)
				s.mu.Unlock()
			}
			close(v.ready)
			if v.err != nil {
				return nil, v.err
			}
			return v, nil
		}
		select {
		case <-v.ready:
		case <-ctx.Done():
			s.Release(v)
			return nil, fmt.Errorf("workspace: view of %s: %w", seed, ctx.Err())
		}
		if v.err == nil {
			return v, nil
		}
		// Another caller's copy failed, perhaps only because its own
		// context ended: try once more with this one.
		if attempt >= viewAttempts || ctx.Err() != nil {
			return nil, v.err
		}
	}
}

// Release counts one user less. The view stays until Close: the next
// sandbox over the same seed reuses it.
func (s *RepoViews) Release(v *RepoView) {
	if v == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.refs > 0 {
		v.refs--
	}
}

// build copies the seed into the view and checks that the copy is of the
// seed the key names. A failed copy is removed.
func (v *RepoView) build(ctx context.Context) error {
	err := staging.CopyTree(ctx, v.key.path, v.dir, staging.CopyLimits{
		Owner:    &staging.Ownership{UID: SandboxUID, GID: SandboxGID},
		Writable: true,
	})
	if err == nil {
		after, kerr := seedKey(v.key.path)
		if kerr != nil {
			err = kerr
		} else if after != v.key {
			err = fmt.Errorf("seed %s changed while it was copied", v.key.path)
		}
	}
	if err != nil {
		if rerr := os.RemoveAll(v.dir); rerr != nil {
			return fmt.Errorf("workspace: view of %s: %w (and cleanup: %v)", v.key.path, err, rerr)
		}
		return fmt.Errorf("workspace: view of %s: %w", v.key.path, err)
	}
	return nil
}

// Close removes the store once no sandbox uses a view. While one does (its
// sandbox was not destroyed first), the store stays, journalled, for a
// later Sweep, and Close reports false.
func (s *RepoViews) Close(ctx context.Context) (removed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, v := range s.views {
		select {
		case <-v.ready:
		default:
			return false, nil // still being copied
		}
		if v.refs > 0 {
			return false, nil
		}
	}
	clear(s.views)
	s.mounted = false
	if err := Remove(ctx, s.ws.Dir); err != nil {
		return false, fmt.Errorf("workspace: repo views: %w", err)
	}
	return true, nil
}

// mountRepoOverlay mounts the sandbox's repository view at RepoDir: an
// overlay whose lower layer is view and whose upper and work directories
// are on a fresh tmpfs of size bytes, so the sandbox's writes stay in its
// own workspace and within its limit.
func (w *Workspace) mountRepoOverlay(view string, size int64) error {
	fs := filepath.Join(w.Dir, repoFSName)
	if err := mountTmpfs(fs, size, 0o700); err != nil {
		return err
	}
	upper, work, tree := filepath.Join(fs, "upper"), filepath.Join(fs, "work"), filepath.Join(fs, repoTree)
	for _, d := range []struct {
		path string
		mode os.FileMode
		uid  int
	}{{upper, 0o755, isolate.SandboxUID}, {work, 0o700, 0}, {tree, 0o700, 0}} {
		if err := os.Mkdir(d.path, d.mode); err != nil {
			return fmt.Errorf("workspace: repo overlay: %w", err)
		}
		if err := os.Chown(d.path, d.uid, d.uid); err != nil {
			return fmt.Errorf("workspace: repo overlay: %w", err)
		}
	}
	for _, p := range []string{view, upper, work} {
		if strings.ContainsAny(p, ",:\\\n") {
			return fmt.Errorf("workspace: %q cannot be an overlay layer", p)
		}
	}
	data := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", view, upper, work, OverlayOptions)
	if err := unix.Mount(overlaySource, tree, "overlay", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, data); err != nil {
		return fmt.Errorf("workspace: mount repo overlay at %s: %w", tree, err)
	}
	return nil
}
