package docker

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/rootfs"
)

// A container's root is the imported image, whose layer every container
// shares: one superblock, one page cache. So the image only provides the
// mount points, /etc's directory and the top-level symlinks (/lib, /lib64),
// and every file of the rootfs (/usr with the interpreter, its libraries
// and the stdlib, and the files of /etc) is bound read-only over it from
// the sandbox's own mount of the rootfs image (see workspace.RootImages),
// in its workspace. Every file the interpreter reads
// then comes through a superblock of that sandbox's own, so no container
// can leave pages in a page cache that a later one reads. workspace.Remove
// takes the mount with the workspace, at Destroy and in Sweep.

// The docker runtime builds the rootfs image at start-up.
var _ isolate.Warmer = (*Runtime)(nil)

// Warm implements isolate.Warmer: it imports t.RootFS into the Engine if it
// is not there yet, builds its erofs image and, when t has a repository,
// the runtime's view of it, so that the first Prepare (inside a query's
// timing bucket) pays for none of them.
func (r *Runtime) Warm(ctx context.Context, t isolate.Template) error {
	if _, err := r.image(ctx, t.RootFS); err != nil {
		return fmt.Errorf("docker: rootfs image: %w", err)
	}
	return r.books.Warm(ctx, t)
}

// engineEtc are the files the Engine itself mounts into /etc, each a file
// of the container's own.
var engineEtc = []string{"hostname", "hosts", "resolv.conf"}

// mountRoot mounts im in the sandbox's workspace and lists what to bind
// from it: every top-level directory but /etc whole, and /etc entry by
// entry, because the Engine creates its own files there and the mount is
// read-only. A top-level entry that is neither a mount point, a directory
// nor a symlink would be read from the shared image layer: it fails closed.
func (s *sandbox) mountRoot(ctx context.Context, im *workspace.RootImage) error {
	p, err := s.ws.MountRoot(ctx, im)
	if err != nil {
		return err
	}
	s.root = p
	ents, err := os.ReadDir(p)
	if err != nil {
		return fmt.Errorf("root mount: %w", err)
	}
	for _, e := range ents {
		top := "/" + e.Name()
		switch {
		case slices.ContainsFunc(rootfs.MountPoints(), func(m string) bool { return path.Dir(m) == "/" && m == top }):
		case e.Type()&os.ModeSymlink != 0:
		case e.IsDir() && e.Name() == "etc":
			etc, err := os.ReadDir(filepath.Join(p, "etc"))
			if err != nil {
				return fmt.Errorf("root mount: %w", err)
			}
			for _, f := range etc {
				if !slices.Contains(engineEtc, f.Name()) && f.Type()&os.ModeSymlink == 0 {
					s.rootDirs = append(s.rootDirs, "etc/"+f.Name())
				}
			}
		case e.IsDir():
			s.rootDirs = append(s.rootDirs, e.Name())
		default:
			return fmt.Errorf("root mount: top-level %s is not a directory: it would be read from the shared image layer", top)
		}
	}
	return nil
}

// rootBinds are the read-only binds of the sandbox's own root entries over
// the image's.
func rootBinds(root string, rel []string) []mount {
	var ms []mount
	for _, d := range rel {
		ms = append(ms, mount{Type: "bind", Source: filepath.Join(root, d), Target: "/" + d, ReadOnly: true, BindOptions: &bindOptions{Propagation: "rprivate"}})
	}
	return ms
}
