package gvisor

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// The bundle root given to runsc is the sandbox's own mount of the rootfs
// image, in its workspace (see workspace.RootImages): the gofer, and the
// Sentry through the files the gofer opens, read the root through a
// superblock of their own, so no sandbox can leave pages in a page cache
// that a later one reads. workspace.Remove unmounts it with the rest of the
// workspace, at Destroy and in Sweep.

// rootMountName is the root mount's entry in a sandbox workspace.
const rootMountName = "root"

// The gvisor runtime builds the rootfs image at start-up.
var _ isolate.Warmer = (*Runtime)(nil)

// Warm implements isolate.Warmer: it builds t.RootFS's image, so that the
// first Prepare does not pay for it.
func (r *Runtime) Warm(ctx context.Context, t isolate.Template) error {
	if err := r.Usable(); err != nil {
		return err
	}
	if err := checkRootFS(t.RootFS); err != nil {
		return err
	}
	_, err := r.rootImage(ctx, t.RootFS)
	return err
}

// rootImage returns the verified image of rootfs. The image store is a
// workspace named after the run, live while the runtime is open, so that
// Sweep removes only the stores of other runs.
func (r *Runtime) rootImage(ctx context.Context, rootfs string) (*workspace.RootImage, error) {
	r.mu.Lock()
	if r.images == nil {
		name := r.runID + "-rootimg"
		s, err := workspace.NewWorkspaceRootImages(r.dir, workspace.Journal{Backend: Name, RunID: r.runID, Name: name, Created: nowUTC()})
		if err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("gvisor: %w", err)
		}
		r.images, r.live[name] = s, true
	}
	images := r.images
	r.mu.Unlock()
	im, err := images.Image(ctx, rootfs)
	if err != nil {
		return nil, fmt.Errorf("gvisor: %w", err)
	}
	return im, nil
}

// mountRoot returns the prepare step that mounts im as the sandbox's root.
func mountRoot(ctx context.Context, im *workspace.RootImage) func(*workspace.Workspace) (string, error) {
	return func(ws *workspace.Workspace) (string, error) {
		p := ws.Path(rootMountName)
		if err := im.Mount(ctx, p); err != nil {
			return "", err
		}
		return p, nil
	}
}

// Close removes the rootfs image store. Sandboxes must be destroyed first.
func (r *Runtime) Close() error {
	r.mu.Lock()
	images := r.images
	r.images = nil
	r.mu.Unlock()
	if images == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := images.Close(ctx); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	r.setLive(filepath.Base(images.Dir()), false)
	return nil
}
