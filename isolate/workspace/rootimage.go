package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/rootfs"
)

// A sandbox's root is never a shared directory of a filesystem whose caches
// can change, nor a bind of one: it is either a mount of the root
// filesystem image of its own (gvisor, docker; below) or the read-only root
// tree on a ramfs whose caches cannot change (direct; roottree.go). A bind
// shares the superblock, so it shares the page cache, the inode cache and
// the dentry cache: on a disk-backed tree one sandbox
// could evict or load chosen pages of a stdlib file and a later one read
// them back (with mincore or preadv2(RWF_NOWAIT), or just by timing a read),
// which carries bits from a confidential repository's query into a public
// one's answer. A fresh erofs mount per sandbox has a fresh superblock and
// so empty caches of its own.
//
// The image itself sits on a ramfs. Its pages are the file: they are always
// resident and can never be evicted or swapped out, so the one thing every
// mount shares, the image file's pages, carries no state. (tmpfs would do
// for residency without swap, but tmpfs files cannot back an erofs mount
// directly, and with swap their pages could be swapped out.)
//
// Where the kernel can mount an erofs image straight from a file (Linux
// 6.12 and later with EROFS_FS_BACKED_BY_FILE) no other resource is
// needed. Elsewhere each mount goes through a loop device of its own,
// attached read-only with autoclear: the device goes away with the mount's
// superblock, or with the broker if it dies before mounting, so no loop
// device can outlive the mount that uses it.

// Names and flags of the image store and the root mounts.
const (
	rootImgSource = "awf-rootimg" // ramfs source name in the host mount table
	erofsType     = "erofs"
	rootFlags     = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	verifyDir     = ".verify"
	// Loop flags from <linux/loop.h>.
	loFlagsReadOnly  = 1
	loFlagsAutoclear = 4
	loopAttempts     = 16
)

// RootImages is one runtime's store of root filesystems: a ramfs at a
// directory the runtime owns, holding one verified erofs image per rootfs
// digest, built on first use, and the read-only root trees (roottree.go),
// each on a ramfs of its own mounted in that directory. It is safe for
// concurrent use.
type RootImages struct {
	fsDir string
	ws    *Workspace // when set, its directory and journal are written before the ramfs exists

	// TestOnlyLoop makes every mount go through a loop device even where
	// file-backed mounts work, so that tests cover both paths.
	TestOnlyLoop bool

	mu       sync.Mutex
	mounted  bool                  // the ramfs is mounted at fsDir
	loop     *bool                 // how images mount here, once known
	byRoot   map[string]*RootImage // rootfs dir -> image
	byDigest map[string]*RootImage // rootfs digest -> image
	// The read-only trees (roottree.go), each on a ramfs of its own
	// mounted in the store's directory.
	treeByRoot   map[string]*RootTree // rootfs dir -> tree
	treeByDigest map[string]*RootTree // rootfs digest -> tree
}

// RootImage is one verified image in a store.
type RootImage struct {
	// Path is the image file.
	Path string
	// Info says which tree it holds and what the file's digest is.
	Info rootfs.ImageInfo
	loop bool
}

// NewRootImages returns a store whose ramfs is mounted at fsDir on first
// use. The caller journals fsDir before the first Image call.
func NewRootImages(fsDir string) *RootImages {
	return &RootImages{fsDir: fsDir, byRoot: map[string]*RootImage{}, byDigest: map[string]*RootImage{},
		treeByRoot: map[string]*RootTree{}, treeByDigest: map[string]*RootTree{}}
}

// NewWorkspaceRootImages returns the store of a backend whose state is a
// directory of workspaces (gvisor, docker): directory parent/j.Name with
// j as its journal, the ramfs at its "fs" entry, so that the backend's
// sweep finds and removes it like any workspace.
func NewWorkspaceRootImages(parent string, j Journal) (*RootImages, error) {
	if err := ValidName(j.Name); err != nil {
		return nil, err
	}
	ws := &Workspace{Dir: filepath.Join(parent, j.Name), Journal: j}
	s := NewRootImages(ws.Path("fs"))
	s.ws = ws
	return s, nil
}

// Dir is the directory the store owns: the workspace directory, or the
// ramfs mount point.
func (s *RootImages) Dir() string {
	if s.ws != nil {
		return s.ws.Dir
	}
	return s.fsDir
}

// Image returns the verified image of the root filesystem dir, building it
// on first use: dir is checked against its own digest, imaged, the image is
// mounted once and its content verified against that digest, and only then
// is it used. Call it at start-up (a runtime's Warm) so that no request pays
// for the build.
func (s *RootImages) Image(ctx context.Context, dir string) (*RootImage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if im, ok := s.byRoot[dir]; ok {
		return im, nil
	}
	if err := s.mountStoreLocked(); err != nil {
		return nil, err
	}
	digest, err := rootfs.Verify(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("workspace: root image: %w", err)
	}
	if im, ok := s.byDigest[digest]; ok {
		s.byRoot[dir] = im
		return im, nil
	}
	final := filepath.Join(s.fsDir, rootfs.ImageName(digest))
	tmp := final + ".tmp"
	_ = os.Remove(tmp)
	info, err := rootfs.BuildImage(ctx, dir, digest, tmp)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	loop, err := s.verifyLocked(ctx, tmp, digest)
	if err != nil {
		_ = os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("workspace: root image: %w", err)
	}
	record := fmt.Sprintf("rootfs %s\nimage %s\nsize %d\n", info.RootDigest, info.FileDigest, info.Size)
	if err := os.WriteFile(final+".digest", []byte(record), 0o400); err != nil {
		return nil, fmt.Errorf("workspace: root image record: %w", err)
	}
	im := &RootImage{Path: final, Info: info, loop: loop}
	s.byRoot[dir] = im
	s.byDigest[digest] = im
	return im, nil
}

// mountStoreLocked creates the store's directories and mounts its ramfs.
// s.mu is held.
func (s *RootImages) mountStoreLocked() error {
	if s.mounted {
		return nil
	}
	if s.ws != nil {
		if err := s.ws.createStore(); err != nil {
			return fmt.Errorf("workspace: root images: %w", err)
		}
	}
	if err := os.MkdirAll(s.fsDir, 0o700); err != nil {
		return fmt.Errorf("workspace: root images: %w", err)
	}
	if err := unix.Mount(rootImgSource, s.fsDir, "ramfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700"); err != nil {
		return fmt.Errorf("workspace: mount the root image ramfs at %s: %w", s.fsDir, err)
	}
	s.mounted = true
	return nil
}

// verifyLocked mounts a fresh image once, decides how images mount on this
// kernel, and checks that the mounted tree has the wanted digest. s.mu is
// held.
func (s *RootImages) verifyLocked(ctx context.Context, image, digest string) (loop bool, err error) {
	target := filepath.Join(s.fsDir, verifyDir)
	if err := os.Mkdir(target, 0o700); err != nil {
		return false, fmt.Errorf("workspace: root image check: %w", err)
	}
	defer func() {
		if uerr := UnmountRoot(target); uerr != nil && err == nil {
			err = uerr
		}
	}()
	switch {
	case s.loop != nil:
		loop = *s.loop
		err = mountImage(image, target, loop)
	case s.TestOnlyLoop:
		loop = true
		err = mountImage(image, target, true)
	default:
		err = mountImage(image, target, false)
		if errors.Is(err, unix.ENOTBLK) {
			// This kernel cannot mount erofs from a file: use loop devices.
			loop = true
			err = mountImage(image, target, true)
		}
	}
	if err != nil {
		return false, fmt.Errorf("workspace: root image check: %w", err)
	}
	s.loop = &loop
	if _, err := rootfs.Verify(ctx, target, digest); err != nil {
		return false, fmt.Errorf("workspace: root image %s does not hold its tree: %w", image, err)
	}
	return loop, nil
}

// Close unmounts the store's ramfs and removes its directory. Sandboxes
// must be gone first; a mount that still uses an image keeps the image
// alive until that mount goes.
func (s *RootImages) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.byRoot)
	clear(s.byDigest)
	clear(s.treeByRoot)
	clear(s.treeByDigest)
	s.mounted = false
	if err := Remove(ctx, s.Dir()); err != nil {
		return fmt.Errorf("workspace: root images: %w", err)
	}
	return nil
}

// Mount mounts the image read-only, nosuid and nodev at target, which it
// creates (it must not exist). Each call makes a new superblock.
func (im *RootImage) Mount(ctx context.Context, target string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("workspace: root mount: %w", err)
	}
	if err := os.Mkdir(target, 0o700); err != nil {
		return fmt.Errorf("workspace: root mount point: %w", err)
	}
	if err := mountImage(im.Path, target, im.loop); err != nil {
		_ = os.Remove(target)
		return fmt.Errorf("workspace: root mount: %w", err)
	}
	return nil
}

// UnmountRoot unmounts a root mount (detaching it when it is still busy)
// and removes its mount point. A missing or unmounted target is fine.
func UnmountRoot(target string) error {
	err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("workspace: unmount root %s: %w", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("workspace: remove root mount point %s: %w", target, err)
	}
	return nil
}

// mountImage mounts image at target, from the file itself or through a
// fresh loop device.
func mountImage(image, target string, loop bool) error {
	if !loop {
		if err := unix.Mount(image, target, erofsType, rootFlags, ""); err != nil {
			return fmt.Errorf("mount erofs %s at %s: %w", image, target, err)
		}
		return nil
	}
	dev, f, err := attachLoop(image)
	if err != nil {
		return err
	}
	// Closing the device after the mount leaves the mount as its only
	// user; with autoclear the device detaches when the mount goes.
	defer f.Close()
	if err := unix.Mount(dev, target, erofsType, rootFlags, ""); err != nil {
		return fmt.Errorf("mount erofs %s (%s) at %s: %w", dev, image, target, err)
	}
	return nil
}

// attachLoop attaches image read-only with autoclear to a free loop device
// and returns the device's path and an open descriptor of it.
func attachLoop(image string) (string, *os.File, error) {
	back, err := os.Open(image)
	if err != nil {
		return "", nil, fmt.Errorf("loop: %w", err)
	}
	defer back.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop: %w", err)
	}
	defer ctl.Close()
	for i := 0; i < loopAttempts; i++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("loop: get a free device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", nil, fmt.Errorf("loop: %w", err)
		}
		cfg := unix.LoopConfig{Fd: uint32(back.Fd())}
		cfg.Info.Flags = loFlagsReadOnly | loFlagsAutoclear
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], image)
		err = unix.IoctlLoopConfigure(int(f.Fd()), &cfg)
		if err == nil {
			return dev, f, nil
		}
		f.Close()
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("loop: attach %s to %s: %w", image, dev, err)
		}
		// Another process took the device first: ask again.
	}
	return "", nil, fmt.Errorf("loop: no free device after %d attempts", loopAttempts)
}

// LoopDevicesOf lists the loop devices whose backing file is below dir, as
// "loopN=path". A leftover means a root mount still exists somewhere.
func LoopDevicesOf(dir string) ([]string, error) {
	ents, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ents {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // detached meanwhile
		}
		back := string(trimNewline(b))
		if back == dir || len(back) > len(dir) && back[:len(dir)+1] == dir+"/" {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(p)))+"="+back)
		}
	}
	return out, nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
