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
// between processes: iproute2's directory, so that an operator sees them
// with `ip netns list`.
const NetNSDir = "/run/netns"

// createNetNS creates a network namespace, writes the sysctls kv in it
// (see setSysctls) and keeps it at path (a bind mount of its nsfs file),
// from a thread that is thrown away afterwards, so no goroutine of the
// caller ever runs in it.
func createNetNS(path string, kv [][2]string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
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
