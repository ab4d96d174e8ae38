package direct

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/staging"
)

// Repository views.
//
// A seed is staged root-owned with every write bit stripped, and it must
// stay that way. An overlay keeps the lower layer's owners and modes, so a
// seed used directly as the lower layer would give uid 65534 a view it can
// read but not change. Instead, the first Prepare for a seed copies it once
// per runtime into views/<run id>-<n> under the private state directory,
// owned by the sandbox user with owner write permission added
// (staging.CopyTree with CopyLimits.Owner and Writable), and every repo
// overlay built from that seed uses the copy as its lower layer. Overlay
// copy-up then keeps each invocation's changes in its own upper layer, the
// copy itself is never written (overlayfs never writes a lower layer, and
// the views directory is 0700 root, so no host user can reach it), and the
// seed is not even mounted.
//
// Cost: one full copy of the seed per seed per runtime, paid by the first
// Prepare that uses it, plus the disk space of the copy in the state
// directory for the life of the runtime; never per invocation.
//
// A view is keyed by the seed's absolute path, device, inode and change
// time, and the seed is checked again after the copy, so a seed replaced
// or changed at the same path gets a new view rather than a stale one.
// Views are journalled before they are created and removed by Close and,
// after a crash, by Sweep.

// viewKey identifies one seed.
type viewKey struct {
	path      string
	dev, ino  uint64
	ctimeSec  int64
	ctimeNsec int64
}

// repoView is one runtime's writable-mode copy of one seed.
type repoView struct {
	key   viewKey
	name  string        // journal name
	dir   string        // the copy; the overlay's lower layer
	ready chan struct{} // closed when the copy is done or has failed
	err   error         // set before ready is closed
	refs  int           // sandboxes using the view; guarded by Runtime.viewMu
}

// viewNamePattern is what a view directory's name looks like: the run id
// and a sequence number.
var viewNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}-[0-9]{1,20}$`)

// viewAttempts bounds how often Prepare retries after another Prepare's
// copy of the same seed failed (for example because its context ended).
const viewAttempts = 3

// seedKey stats the seed directory without following a final symlink.
func seedKey(seed string) (viewKey, error) {
	var st unix.Stat_t
	if err := unix.Lstat(seed, &st); err != nil {
		return viewKey{}, fmt.Errorf("seed %s: %w", seed, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return viewKey{}, fmt.Errorf("seed %s is not a directory", seed)
	}
	return viewKey{path: seed, dev: st.Dev, ino: st.Ino, ctimeSec: st.Ctim.Sec, ctimeNsec: st.Ctim.Nsec}, nil
}

// The direct runtime does per-seed work that a broker can do at start-up.
var _ isolate.Warmer = (*Runtime)(nil)

// Warm implements isolate.Warmer: it builds t.RootFS's image and makes
// t.Repo's view ahead of the first Prepare.
func (r *Runtime) Warm(ctx context.Context, t isolate.Template) error {
	if t.RootFS != "" {
		if _, err := r.rootImage(ctx, t.RootFS); err != nil {
			return err
		}
	}
	if t.Repo == "" {
		return nil
	}
	return r.WarmView(ctx, t.Repo)
}

// WarmView makes this runtime's view of seed now, so that the first Prepare
// over it does not pay the copy (for example at broker start-up, under its
// own deadline). It is optional: Prepare makes a missing view itself.
func (r *Runtime) WarmView(ctx context.Context, seed string) error {
	if err := r.Usable(); err != nil {
		return err
	}
	if err := checkRepo(seed); err != nil {
		return err
	}
	v, err := r.acquireView(ctx, seed)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	r.releaseView(v)
	return nil
}

// acquireView returns the view of seed, copying the seed on first use, and
// counts one more user of it. Each successful call must be paired with
// releaseView.
func (r *Runtime) acquireView(ctx context.Context, seed string) (*repoView, error) {
	seed = filepath.Clean(seed)
	for attempt := 1; ; attempt++ {
		key, err := seedKey(seed)
		if err != nil {
			return nil, err
		}
		r.viewMu.Lock()
		if r.closed.Load() {
			r.viewMu.Unlock()
			return nil, errors.New("runtime closed")
		}
		v, found := r.views[key]
		if !found {
			r.viewSeq++
			base := fmt.Sprintf("%s-%d", r.runID, r.viewSeq)
			v = &repoView{key: key, name: "view-" + base, dir: filepath.Join(r.viewDir, base), ready: make(chan struct{})}
			r.views[key] = v
		}
		v.refs++
		r.viewMu.Unlock()
		if !found {
			v.err = r.buildView(ctx, v)
			if v.err != nil {
				r.viewMu.Lock()
				delete(r.views, key)
				r.viewMu.Unlock()
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
			r.releaseView(v)
			return nil, fmt.Errorf("view of %s: %w", seed, ctx.Err())
		}
		if v.err == nil {
			return v, nil
		}
		// Another Prepare's copy failed, perhaps only because its own
		// context ended: try once more with this one.
		if attempt >= viewAttempts || ctx.Err() != nil {
			return nil, v.err
		}
	}
}

// releaseView counts one user less. The view stays until Close: the next
// sandbox over the same seed reuses it.
func (r *Runtime) releaseView(v *repoView) {
	r.viewMu.Lock()
	defer r.viewMu.Unlock()
	if v.refs > 0 {
		v.refs--
	}
}

// buildView journals the view and copies the seed into it.
func (r *Runtime) buildView(ctx context.Context, v *repoView) error {
	if strings.ContainsAny(v.dir, ",:\\\n") {
		return fmt.Errorf("view directory %q cannot be an overlay layer", v.dir)
	}
	e := entry{Kind: entryView, Name: v.name, RunID: r.runID, View: v.dir, Seed: v.key.path, Created: time.Now().UTC()}
	if err := r.track(e); err != nil {
		return err
	}
	err := staging.CopyTree(ctx, v.key.path, v.dir, staging.CopyLimits{
		Owner:    &staging.Ownership{UID: isolate.SandboxUID, GID: isolate.SandboxGID},
		Writable: true,
	})
	if err == nil {
		// The copy must be of the seed the key names.
		after, kerr := seedKey(v.key.path)
		if kerr != nil {
			err = kerr
		} else if after != v.key {
			err = fmt.Errorf("seed %s changed while it was copied", v.key.path)
		}
	}
	if err != nil {
		if rerr := r.removeView(v.name, v.dir); rerr != nil {
			return fmt.Errorf("view of %s: %w (and cleanup: %v)", v.key.path, err, rerr)
		}
		return fmt.Errorf("view of %s: %w", v.key.path, err)
	}
	return nil
}

// removeView deletes a view directory and then its journal entry. The
// directory must be a direct child of the views directory, whatever the
// journal says.
func (r *Runtime) removeView(name, dir string) error {
	if filepath.Clean(dir) != dir || filepath.Dir(dir) != r.viewDir || !viewNamePattern.MatchString(filepath.Base(dir)) {
		return fmt.Errorf("view %s is not a view directory in %s", dir, r.viewDir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove view %s: %w", dir, err)
	}
	return r.untrack(name)
}

// closeViews removes every view no sandbox uses any more. A view still in
// use (its sandbox was not destroyed before Close) stays journalled for the
// next Sweep.
func (r *Runtime) closeViews() error {
	r.viewMu.Lock()
	defer r.viewMu.Unlock()
	var errs []error
	for key, v := range r.views {
		select {
		case <-v.ready:
		default:
			continue // still being copied: its journal entry is there for Sweep
		}
		if v.refs > 0 || v.err != nil {
			continue
		}
		if err := r.removeView(v.name, v.dir); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(r.views, key)
	}
	return errors.Join(errs...)
}
