package workspace

import "context"

// RootMountName is the workspace entry at which MountRoot mounts a
// sandbox's root.
const RootMountName = "root"

// MountRoot mounts im at the workspace's RootMountName, a superblock of the
// sandbox's own (see RootImages), and returns its path. docker binds the
// rootfs entries from it over the image's, gvisor hands it to runsc as the
// bundle root: one place, so that both mount it the same way. Remove takes
// the mount with the rest of the workspace.
func (w *Workspace) MountRoot(ctx context.Context, im *RootImage) (string, error) {
	p := w.Path(RootMountName)
	if err := im.Mount(ctx, p); err != nil {
		return "", err
	}
	return p, nil
}
