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
		if err := writeJournal(r.journal, e); err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("direct: %w", err)
		}
		r.active[e.Name] = true
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := images.Close(ctx); err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	r.mu.Lock()
	r.images, r.imgEntry = nil, ""
	r.mu.Unlock()
	return r.untrack(name)
}
