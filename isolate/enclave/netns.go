package enclave

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// NetNSDir holds the bind mounts that keep the enclave namespaces alive
// between processes. It is awf's own, root only (0700), and a tmpfs of its
// own (EnsureNetNSDir), not iproute2's /run/netns: an agent that can stat
// /run/netns would read the moment an enclave started or was torn down
// from the directory's mtime and the entries' ctimes, and statfs of /run
// would move with every namespace file. Every agent's view covers this
// directory (broker/host AgentHide), and nothing under it changes the
// metadata of anything outside it. An operator lists the namespaces with
// `ls /run/awf-netns` and enters one with `nsenter --net=/run/awf-netns/NAME`.
const NetNSDir = "/run/awf-netns"

// LegacyNetNSDir is where enclave namespaces lived before NetNSDir; the
// sweep still reclaims what a broker of that version left there.
const LegacyNetNSDir = "/run/netns"

// netNSDirSize bounds NetNSDir's tmpfs: it holds only empty files, each a
// mount point for one namespace.
const netNSDirSize = "size=64k,nr_inodes=4096"

// EnsureNetNSDir makes NetNSDir a root-only (0700) directory with a tmpfs
// of its own mounted on it, once per boot: the tmpfs stays when a run ends,
// so that making and removing namespace files never touches the directory
// above it again. It runs before any agent starts (preflight), so every
// agent's view can cover it. It refuses a NetNSDir that is a symlink, not
// root's, or open to others. Concurrent callers serialise on a lock of the
// directory, and the mount is checked again under the lock.
// LegacyNetNSDir is not made: only the sweep reads it.
func EnsureNetNSDir() error { return ensureNetNSDir(NetNSDir) }

func ensureNetNSDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("netns dir: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns dir %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("netns dir %s: lock: %w", dir, err)
	}
	mounted, err := netNSDirMounted(dir)
	if err != nil {
		return err
	}
	if !mounted {
		// The directory under the tmpfs is never written; an older test
		// may have made it 0755, so narrow root's own first.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("netns dir %s: %w", dir, err)
		}
		if st.Uid == 0 && st.Gid == 0 {
			if err := unix.Fchmod(fd, 0o700); err != nil {
				return fmt.Errorf("netns dir %s: %w", dir, err)
			}
		}
		if err := checkRootOnly(dir); err != nil {
			return err
		}
		if err := unix.Mount("awf-netns", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
			"mode=0700,uid=0,gid=0,"+netNSDirSize); err != nil {
			return fmt.Errorf("netns dir %s: mount tmpfs: %w", dir, err)
		}
		if mounted, err = netNSDirMounted(dir); err != nil {
			return err
		} else if !mounted {
			return fmt.Errorf("netns dir %s: no tmpfs after mounting one", dir)
		}
	}
	return checkRootOnly(dir)
}

// netNSDirMounted reports whether dir is a tmpfs mounted on dir itself
// (its device differs from its parent's), not a tmpfs that happens to
// hold it (a /run that is a tmpfs).
func netNSDirMounted(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, fmt.Errorf("netns dir %s: %w", dir, err)
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("netns dir %s: %w", dir, err)
	}
	if st.Dev == parent.Dev {
		return false, nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return false, fmt.Errorf("netns dir %s: %w", dir, err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return false, fmt.Errorf("netns dir %s: something other than awf's tmpfs is mounted there (filesystem type %#x)", dir, fs.Type)
	}
	return true, nil
}

// checkRootOnly refuses a dir that is a symlink, not a directory, not
// root's, or open to group or others.
func checkRootOnly(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("netns dir %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Gid != 0 || st.Mode&0o077 != 0 {
		return fmt.Errorf("netns dir %s: must be a directory owned by root:root with mode 0700 (mode %#o, owner %d:%d)",
			dir, st.Mode, st.Uid, st.Gid)
	}
	return nil
}

// createNetNS creates a network namespace, writes the sysctls kv in it
// (see setSysctls) and keeps it at path (a bind mount of its nsfs file),
// from a thread that is thrown away afterwards, so no goroutine of the
// caller ever runs in it.
func createNetNS(path string, kv [][2]string) error {
	if filepath.Dir(path) == NetNSDir {
		if err := EnsureNetNSDir(); err != nil {
			return err
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("netns dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	f.Close()
	err = onThrowawayThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", path, err)
		}
		if err := setSysctls(kv); err != nil {
			// The caller never sees this namespace: take it back here.
			if uerr := unix.Unmount(path, unix.MNT_DETACH); uerr != nil {
				return fmt.Errorf("%w (and unmount: %v)", err, uerr)
			}
			return err
		}
		return nil
	})
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("netns %s: %w", path, err)
	}
	return nil
}

// removeNetNS unmounts and removes a namespace created by createNetNS. The
// namespace itself ends when its last user (a process or descriptor) does.
func removeNetNS(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// InNetNS runs fn on an OS thread that has joined the network namespace at
// path. The thread is never returned to the Go scheduler (the goroutine
// exits locked, so the runtime ends the thread): nothing else ever runs in
// the namespace by accident. Sockets fn opens belong to that namespace for
// their whole life, wherever they are used later.
func InNetNS(path string, fn func() error) error {
	return onThrowawayThread(func() error {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", path, err)
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("join netns %s: %w", path, err)
		}
		return fn()
	})
}

// onThrowawayThread runs fn on a locked OS thread that ends with it.
func onThrowawayThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread may have changed namespaces.
		errc <- fn()
	}()
	return <-errc
}

// setSysctls writes each key (a path below /proc/sys/net) and reads it
// back, in the calling thread's network namespace: /proc/sys/net is
// resolved against the opening thread's namespace.
func setSysctls(kv [][2]string) error {
	for _, e := range kv {
		p := "/proc/sys/net/" + e[0]
		if err := os.WriteFile(p, []byte(e[1]+"\n"), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", e[0], err)
		}
		got, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(got)) != e[1] {
			return fmt.Errorf("sysctl %s: reads %q after writing %s", e[0], strings.TrimSpace(string(got)), e[1])
		}
	}
	return nil
}
