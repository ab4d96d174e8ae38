package direct

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/awf-project/awf/isolate/workspace"
)

// The root of every sandbox is a mount of its own of the rootfs image (see
// workspace.RootImages for why a shared bind is not enough): the image is
// built once per rootfs into a ramfs below roots/, journalled as a root
// entry, and each sandbox mounts it afresh inside its scratch tmpfs, so
// that unmounting the scratch tmpfs (teardown or Sweep) also takes the root
// mount with it.

// rootMountName is the root mount's directory inside a sandbox's scratch tmpfs.
const rootMountName = "root"

// rootImage returns the verified image of rootfs, creating the image store
// (journalled first) on first use.
func (r *Runtime) rootImage(ctx context.Context, rootfs string) (*workspace.RootImage, error) {
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
	im, err := images.Image(ctx, rootfs)
	if err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	return im, nil
}

// closeImages removes the image store; the caller has destroyed every
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
