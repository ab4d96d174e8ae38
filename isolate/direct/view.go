package direct

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// Repository views.
//
// Every repo overlay's lower layer is this runtime's view of its seed, not
// the seed itself: workspace.RepoViews, the store gvisor uses too, says why
// and how (one copy per seed per runtime, owned by the sandbox user, under
// a 0700 root directory on a noatime bind, keyed by the seed's identity so
// that a replaced or changed seed gets a new view). The store is the
// workspace views/<run id>-views of the state directory, created on first
// use.
//
// The store is one resource of this runtime like a root image store: it is
// journalled (kind view, naming the store's directory) before it exists,
// so that a crash at any point, a copy half done included, leaves an entry
// for Sweep; Close removes it once no sandbox uses a view, and Sweep
// removes a store another runtime left, journalled or not.

// viewStoreSuffix ends the name of a view store's directory.
const viewStoreSuffix = "-views"

// The direct runtime does per-seed work that a broker can do at start-up.
var _ isolate.Warmer = (*Runtime)(nil)

// Warm implements isolate.Warmer: it copies t.RootFS into its read-only root tree and makes
// t.Repo's view ahead of the first Prepare.
func (r *Runtime) Warm(ctx context.Context, t isolate.Template) error {
	if t.RootFS != "" {
		if _, err := r.rootTree(ctx, t.RootFS); err != nil {
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

// acquireView returns the view of seed from the store, journalling the
// store first on first use. Each successful call must be paired with
// releaseView.
func (r *Runtime) acquireView(ctx context.Context, seed string) (*workspace.RepoView, error) {
	if err := r.trackViews(); err != nil {
		return nil, err
	}
	return r.views.Acquire(ctx, seed)
}

// releaseView counts one user less of v. The view stays until Close: the
// next sandbox over the same seed reuses it.
func (r *Runtime) releaseView(v *workspace.RepoView) { r.views.Release(v) }

// newViewStore returns the runtime's view store. Nothing of it exists on
// disk before its first Acquire, which trackViews precedes.
func newViewStore(runID, viewDir string) (*workspace.RepoViews, error) {
	j := workspace.Journal{Backend: Name, RunID: runID, Name: runID + viewStoreSuffix, Created: time.Now().UTC()}
	return workspace.NewRepoViews(viewDir, j)
}

// trackViews journals the view store once, before its first Acquire
// creates it.
func (r *Runtime) trackViews() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.viewEntry != "" {
		return nil
	}
	// Close reads viewEntry under mu after setting closed: a store
	// journalled after that would outlive the runtime.
	if r.closed.Load() {
		return errors.New("runtime closed")
	}
	dir := r.views.Dir()
	// Each view, a directory below the store's, is an overlay's lower
	// layer, whose path the overlay's options cannot quote.
	if strings.ContainsAny(dir, ",:\\\n") {
		return fmt.Errorf("view store %q cannot hold an overlay layer", dir)
	}
	e := entry{Kind: entryView, Name: "view-" + filepath.Base(dir), RunID: r.runID, View: dir, Created: time.Now().UTC()}
	if err := r.trackLocked(e); err != nil {
		return err
	}
	r.viewEntry = e.Name
	return nil
}

// closeViews removes the view store. A view still in use (its sandbox was
// not destroyed before Close) or still being copied keeps the store,
// journalled, for the next Sweep.
func (r *Runtime) closeViews() error {
	r.mu.Lock()
	name := r.viewEntry
	r.mu.Unlock()
	return r.closeStore(name, r.views.Close)
}

// removeViews deletes a view store a crash left (or, from before the
// store, a single view), its mounts first, and then its journal entry. The
// directory must be a direct child of the views directory, whatever the
// journal says.
func (r *Runtime) removeViews(ctx context.Context, name, dir string) error {
	if filepath.Clean(dir) != dir || filepath.Dir(dir) != r.viewDir || workspace.ValidName(filepath.Base(dir)) != nil {
		return fmt.Errorf("view %s is not a view directory in %s", dir, r.viewDir)
	}
	if err := workspace.Remove(ctx, dir); err != nil {
		return fmt.Errorf("remove views %s: %w", dir, err)
	}
	return r.untrack(name)
}

// isViewDir reports whether name, an entry of the views directory, can be
// a view store (or a view of before the store): what an unjournalled
// Sweep removes there.
func isViewDir(name string) bool {
	return workspace.ValidName(name) == nil
}
