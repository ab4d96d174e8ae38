package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/rootfs"
	"github.com/awf-project/awf/staging"
)

// A root tree is the other safe shape of a root filesystem: one verified
// copy of the tree on a ramfs of its own, made read-only at the superblock
// once copied, which every sandbox of a runtime uses as its root. It shares
// one superblock between sandboxes, and that is safe only because nothing
// in that superblock can change:
//
//   - page cache: a ramfs file's pages are the file. They are always
//     resident, never evicted, reclaimed or swapped; posix_fadvise(DONTNEED)
//     and reclaim skip them. A sender can neither load nor evict a page,
//     so residency, mincore and the time of a first read say the same to
//     every sandbox (the image's own pages on its ramfs carry no state for
//     the same reason).
//   - inode and dentry cache: every inode and positive dentry of a ramfs is
//     pinned for the life of the mount, and a ramfs keeps no negative
//     dentry (its lookups delete them at the last reference), so a lookup
//     of a missing name leaves nothing for the next sandbox to time.
//   - content and metadata: the superblock is read-only, so no mount of it
//     can write a file or set an access time; widening a mount's flags
//     would not make the superblock writable, and only the host's root
//     can remount it.
//
// What a process holds on a shared inode (locks, notify marks, mappings;
// leases need a file it owns) ends with the process, and every sandbox's
// processes are gone before the next job starts. Two jobs that ran at the
// same time could signal through such a hold (a lock taken and tested), as
// through any live host state: the broker never overlaps two jobs (the
// run's one lane), and each runtime, so each run, has a tree of its own.
//
// Compared with a mount of the image per sandbox, nothing is mounted or
// unmounted per sandbox and no page cache is filled at a request or freed
// at teardown: the interpreter's pages are already there. It costs one
// copy of the tree per runtime, held in memory (about the image's size).

// treePrefix names a tree's ramfs mount point in the store directory.
const treePrefix = "tree-"

// treeSource names the tree ramfs in the host mount table.
const treeSource = "awf-roottree"

// treeFlags are the tree ramfs's mount flags once it holds its copy.
const treeFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV

// RootTree is one verified, read-only root tree in a store.
type RootTree struct {
	// Dir is the tree: the root of a sandbox.
	Dir string
	// Digest is the rootfs digest of the tree.
	Digest string
}

// Tree returns the verified, read-only tree of the root filesystem dir,
// copying it on first use: dir is checked against its own digest, copied
// onto a fresh ramfs, the copy is verified against that digest, and the
// ramfs is remounted read-only before it is used. Call it at start-up (a
// runtime's Warm) so that no request pays for the copy.
func (s *RootImages) Tree(ctx context.Context, dir string) (*RootTree, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tr, ok := s.treeByRoot[dir]; ok {
		return tr, nil
	}
	if err := s.mountStoreLocked(); err != nil {
		return nil, err
	}
	digest, err := rootfs.Verify(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("workspace: root tree: %w", err)
	}
	if tr, ok := s.treeByDigest[digest]; ok {
		s.treeByRoot[dir] = tr
		return tr, nil
	}
	mnt := filepath.Join(s.fsDir, treePrefix+rootfs.ShortDigest(digest))
	tr, err := copyTree(ctx, dir, mnt, digest)
	if err != nil {
		if uerr := UnmountRoot(mnt); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return nil, err
	}
	s.treeByRoot[dir] = tr
	s.treeByDigest[digest] = tr
	return tr, nil
}

// copyTree mounts a ramfs at mnt, copies dir into it, verifies the copy
// against digest and makes the ramfs read-only. On error the caller
// unmounts mnt.
func copyTree(ctx context.Context, dir, mnt, digest string) (*RootTree, error) {
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: root tree: %w", err)
	}
	if err := unix.Mount(treeSource, mnt, "ramfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return nil, fmt.Errorf("workspace: mount the root tree ramfs at %s: %w", mnt, err)
	}
	tree := filepath.Join(mnt, "root")
	if err := staging.CopyTree(ctx, dir, tree, staging.CopyLimits{}); err != nil {
		return nil, fmt.Errorf("workspace: root tree: %w", err)
	}
	if _, err := rootfs.Verify(ctx, tree, digest); err != nil {
		return nil, fmt.Errorf("workspace: the root tree copy of %s does not hold its tree: %w", dir, err)
	}
	// Read-only at the superblock (no MS_BIND): every mount of it,
	// whatever its own flags, is read-only from here on.
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|treeFlags, ""); err != nil {
		return nil, fmt.Errorf("workspace: make the root tree %s read-only: %w", mnt, err)
	}
	if err := checkTreeReadOnly(tree); err != nil {
		return nil, err
	}
	return &RootTree{Dir: tree, Digest: digest}, nil
}

// checkTreeReadOnly proves that the tree's superblock refuses a write from
// the host's root, which no mount flag of a sandbox's can then undo.
func checkTreeReadOnly(tree string) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(tree, &sfs); err != nil {
		return fmt.Errorf("workspace: root tree: %w", err)
	}
	if uint32(sfs.Type) != unix.RAMFS_MAGIC || sfs.Flags&unix.ST_RDONLY == 0 {
		return fmt.Errorf("workspace: root tree %s is not a read-only ramfs", tree)
	}
	probe := filepath.Join(tree, ".awf-write-probe")
	err := os.Mkdir(probe, 0o700)
	if err == nil {
		_ = os.Remove(probe)
		return fmt.Errorf("workspace: root tree %s took a write after its remount", tree)
	}
	if !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("workspace: root tree %s: a write failed with %w, not EROFS", tree, err)
	}
	return nil
}
