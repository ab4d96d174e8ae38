package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/mountinfo"
)

// tmpfsSource names our tmpfs mounts in the host mount table.
const tmpfsSource = "awf-workspace"

// mountTmpfs mounts a tmpfs owned by the sandbox user (MountTmpfs).
func mountTmpfs(target string, size int64, mode os.FileMode) error {
	return MountTmpfs(target, size, mode, SandboxUID, SandboxGID)
}

// MountTmpfs creates target and mounts on it a fresh noexec, nosuid, nodev
// tmpfs of size bytes whose root has mode (permissions and the sticky bit)
// and owner uid:gid. It is every tmpfs a backend mounts on the host for a
// sandbox. The flags are those of isolate.Describe's writable mounts: a
// backend that binds the tmpfs (docker cannot set them on a bind) inherits
// them. The inode count is the kernel's default for every one alike, so
// that statvfs shows a script the same numbers on every backend.
func MountTmpfs(target string, size int64, mode os.FileMode, uid, gid int) error {
	perm := uint32(mode.Perm())
	if mode&os.ModeSticky != 0 {
		perm |= unix.S_ISVTX
	}
	if err := os.Mkdir(target, 0o700); err != nil {
		return fmt.Errorf("workspace: mount point %s: %w", target, err)
	}
	data := fmt.Sprintf("size=%d,mode=%o,uid=%d,gid=%d", size, perm, uid, gid)
	if err := unix.Mount(tmpfsSource, target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, data); err != nil {
		return fmt.Errorf("workspace: mount tmpfs at %s: %w", target, err)
	}
	return nil
}

// sealDir bind-mounts dir onto itself read-only, noexec, nosuid and nodev,
// so that a backend binding it (docker cannot set these on a bind)
// inherits the flags. Remove unmounts it with the rest of the workspace.
func sealDir(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("workspace: bind %s: %w", dir, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		return fmt.Errorf("workspace: seal %s: %w", dir, err)
	}
	return nil
}

// MountScratch mounts a fresh world-writable, sticky, noexec, nosuid, nodev
// tmpfs of size bytes at Path(name), for a backend that binds it at /tmp,
// and returns its path.
func (w *Workspace) MountScratch(name string, size int64) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	p := w.Path(name)
	return p, MountTmpfs(p, size, 0o777|os.ModeSticky, 0, 0)
}

// DetachAndRemove detaches every mount stacked on dir, with the mounts
// below each, and removes the directory; a missing dir or "" is fine. It is
// the destroy path of a tree of tmpfs mounts that nothing else holds
// (direct's scratch, a root bind): lazy detaching cannot wait on a busy
// mount, and it relies on umount2 itself (EINVAL: not a mount point), with
// no mount-table read, which costs time on every destroy and can miss an
// entry while other sandboxes mount. A tree that must be released before
// the call returns (a loop device's filesystem) takes Remove instead.
func DetachAndRemove(dir string) error {
	if dir == "" {
		return nil
	}
	for i := 0; ; i++ {
		err := unix.Unmount(dir, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break
		}
		if err != nil {
			return fmt.Errorf("workspace: unmount %s: %w", dir, err)
		}
		if i == 16 {
			return fmt.Errorf("workspace: unmount %s: still mounted after %d unmounts", dir, i+1)
		}
	}
	var err error
	for i := 0; i < 5; i++ {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("workspace: remove %s: %w", dir, err)
}

// UnmountBelow is unmountBelow, for the host's orphan sweep: a dead run's
// runtime state may hold mounts its runtime's own sweep did not know.
func UnmountBelow(ctx context.Context, dir string) error { return unmountBelow(ctx, dir) }

// unmountBelow unmounts every mount at or below dir, deepest first. A busy
// mount is detached instead, which removes it from the host's view.
func unmountBelow(ctx context.Context, dir string) error {
	// Read the mount table of the thread that unmounts. /proc/self is the
	// thread-group leader, which libcontainer may have left parked in a
	// finished container's mount namespace (its mount-source thread never
	// unlocks, and the Go runtime parks rather than ends the main thread).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("workspace: resolve %s: %w", dir, err)
	}
	for tries := 0; ; tries++ {
		points, err := mountsBelow(real)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		if tries >= 4 {
			return fmt.Errorf("workspace: %d mounts remain below %s: %s", len(points), dir, strings.Join(points, ", "))
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("workspace: unmount below %s: %w", dir, err)
		}
		for _, p := range points {
			err := unix.Unmount(p, unix.UMOUNT_NOFOLLOW)
			if errors.Is(err, unix.EBUSY) {
				err = unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			}
			if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("workspace: unmount %s: %w", p, err)
			}
		}
	}
}

// mountsBelow lists the mount points at or below dir in the calling thread's
// mount namespace, deepest first. The caller locks its OS thread.
func mountsBelow(dir string) ([]string, error) {
	ms, err := mountinfo.Read(mountinfo.Thread)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	var points []string
	for _, m := range ms {
		if m.Below(dir) {
			points = append(points, m.Point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points, nil
}
