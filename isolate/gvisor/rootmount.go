package gvisor

import (
	"context"
	"errors"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// The bundle root given to runsc is the sandbox's own mount of the rootfs
// image, in its workspace (see workspace.RootImages): the gofer, and the
// Sentry through the files the gofer opens, read the root through a
// superblock of their own, so no sandbox can leave pages in a page cache
// that a later one reads. workspace.Remove unmounts it with the rest of the
// workspace, at Destroy and in Sweep.

// The gvisor runtime builds the rootfs image at start-up.
var _ isolate.Warmer = (*Runtime)(nil)

// Warm implements isolate.Warmer: it builds t.RootFS's image, so that the
// first Prepare does not pay for it.
func (r *Runtime) Warm(ctx context.Context, t isolate.Template) error {
	return r.books.Warm(ctx, t)
}

// mountRoot returns the prepare step that mounts im as the sandbox's root.
func mountRoot(ctx context.Context, im *workspace.RootImage) func(*workspace.Workspace) (string, error) {
	return func(ws *workspace.Workspace) (string, error) { return ws.MountRoot(ctx, im) }
}

// Close removes the rootfs image store and the repository views.
// Sandboxes must be destroyed first.
func (r *Runtime) Close() error {
	return errors.Join(r.books.CloseImages(), r.books.CloseViews())
}
