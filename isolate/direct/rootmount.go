package direct

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/awf-project/awf/isolate/workspace"
)

// The root of every sandbox is the runtime's read-only root tree of its
// rootfs (see workspace.RootTree for why sharing it carries nothing): a
// verified copy on a ramfs of its own, remounted read-only at the
// superblock, inside the runtime's root store below roots/, which is
// journalled as a root entry. The sandbox needs no mount of its own on the
// host: libcontainer binds the tree inside the sandbox's mount namespace,
// so nothing is mounted or unmounted per sandbox for its root.

// rootMountName is the directory inside a sandbox's scratch tmpfs where
// earlier versions mounted the sandbox's own root; Sweep still unmounts it
// there for a journal such a version left.
const rootMountName = "root"

// rootTree returns the verified, read-only tree of rootfs, creating the
// root store (journalled first) on first use.
func (r *Runtime) rootTree(ctx context.Context, rootfs string) (*workspace.RootTree, error) {
	fi, err := os.Lstat(rootfs)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("direct: rootfs %s is not a directory", rootfs)
	}
	r.mu.Lock()
	if r.images == nil {
		base := r.runID + "-img"
		dst := filepath.Join(r.roots, base)
		e := entry{Kind: entryRoot, Name: "root-" + base, RunID: r.runID, Mount: dst, Created: time.Now().UTC()}
		if err := r.trackLocked(e); err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.images = workspace.NewRootImages(dst)
		r.imgEntry = e.Name
	}
	images := r.images
	r.mu.Unlock()
	tr, err := images.Tree(ctx, rootfs)
	if err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	return tr, nil
}

// closeImages removes the root store (its tree); the caller has destroyed every
// sandbox.
func (r *Runtime) closeImages() error {
	r.mu.Lock()
	images, name := r.images, r.imgEntry
	r.mu.Unlock()
	if images == nil {
		return nil
	}
	return r.closeStore(name, func(ctx context.Context) (bool, error) {
		if err := images.Close(ctx); err != nil {
			return false, err
		}
		r.mu.Lock()
		r.images, r.imgEntry = nil, ""
		r.mu.Unlock()
		return true, nil
	})
}

// closeStore closes a store of this runtime (root images, repository
// views) under a deadline of its own and, once close reports the store
// gone, removes its journal entry name ("": the store was never
// journalled, so never made). A store close leaves (one still in use)
// stays journalled for the next Sweep.
func (r *Runtime) closeStore(name string, close func(context.Context) (removed bool, err error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	removed, err := close(ctx)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	if !removed || name == "" {
		return nil
	}
	return r.untrack(name)
}
