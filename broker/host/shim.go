package host

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ShimArgs is what the agent shim needs, passed on its command line (no secret).
type ShimArgs struct {
	UID, GID    int
	PrivateBase string
	IngressBase string
	IngressRoot string // "" when bounded queries are disabled
}

// Argv renders the shim's arguments after "awf run --agent-shim".
func (a ShimArgs) Argv() []string {
	return []string{strconv.Itoa(a.UID), strconv.Itoa(a.GID), a.PrivateBase, a.IngressBase, a.IngressRoot}
}

// ParseShimArgs reverses Argv.
func ParseShimArgs(v []string) (ShimArgs, error) {
	if len(v) != 5 {
		return ShimArgs{}, errors.New("agent shim: want 5 arguments")
	}
	uid, err1 := strconv.Atoi(v[0])
	gid, err2 := strconv.Atoi(v[1])
	if err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return ShimArgs{}, errors.New("agent shim: bad uid/gid")
	}
	for _, p := range v[2:4] {
		if !filepath.IsAbs(p) {
			return ShimArgs{}, errors.New("agent shim: paths must be absolute")
		}
	}
	return ShimArgs{UID: uid, GID: gid, PrivateBase: v[2], IngressBase: v[3], IngressRoot: v[4]}, nil
}

// RunShim is pid 1 of the agent's new pid namespace, root in its new mount
// namespace. It covers the private base with an empty read-only tmpfs,
// replaces the ingress base by a read-only tmpfs holding only this run's
// directory, mounts a fresh /proc (so no process outside the namespace is
// visible), empties the capability bounding set, sets no_new_privs, and then
// runs argv as the agent user with its environment. It reaps every child and
// returns argv's exit status (128+signal when killed).
func RunShim(a ShimArgs, argv []string) (int, error) {
	if len(argv) == 0 {
		return 127, errors.New("agent shim: no command")
	}
	runtime.LockOSThread() // mounts, prctl and the fork all happen on this thread
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return 1, fmt.Errorf("agent shim: make mounts private: %w", err)
	}
	if err := coverDir(a.PrivateBase); err != nil {
		return 1, err
	}
	if err := coverIngress(a.IngressBase, a.IngressRoot); err != nil {
		return 1, err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return 1, fmt.Errorf("agent shim: mount /proc: %w", err)
	}
	if err := dropBounding(); err != nil {
		return 1, err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 1, fmt.Errorf("agent shim: no_new_privs: %w", err)
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := lookPath(path)
		if err != nil {
			return 127, fmt.Errorf("agent shim: %s: %w", path, err)
		}
		path = p
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGCHLD)
	wd, _ := os.Getwd()
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   wd,
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: []uint32{}},
		},
	})
	if err != nil {
		return 127, fmt.Errorf("agent shim: start %s: %w", argv[0], err)
	}
	for {
		// Reap everything that has exited; the command's own status ends the shim.
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err != nil || pid <= 0 {
				if errors.Is(err, unix.ECHILD) {
					return 1, errors.New("agent shim: command vanished")
				}
				break
			}
			if pid == proc.Pid {
				switch {
				case ws.Exited():
					return ws.ExitStatus(), nil
				case ws.Signaled():
					return 128 + int(ws.Signal()), nil
				}
			}
		}
		s := <-sigs
		if s != syscall.SIGCHLD {
			_ = proc.Signal(s)
		}
	}
}

func lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("not found in PATH")
}

// coverDir mounts an empty read-only tmpfs over dir, if it exists.
func coverDir(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Mount("awf-hidden", dir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0755"); err != nil {
		return fmt.Errorf("agent shim: cover %s: %w", dir, err)
	}
	return nil
}

// coverIngress replaces base by a read-only tmpfs that holds only root (the
// run's own directory, bind-mounted back), so sockets of other runs,
// present or future, are out of reach.
func coverIngress(base, root string) error {
	if _, err := os.Stat(base); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var keep *os.File
	if root != "" {
		f, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("agent shim: open %s: %w", root, err)
		}
		defer f.Close()
		keep = f
	}
	if err := unix.Mount("awf-ingress", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=16k,mode=0755"); err != nil {
		return fmt.Errorf("agent shim: cover %s: %w", base, err)
	}
	if keep != nil {
		target := filepath.Join(base, filepath.Base(root))
		if err := os.Mkdir(target, 0o755); err != nil {
			return fmt.Errorf("agent shim: %w", err)
		}
		src := "/proc/self/fd/" + strconv.Itoa(int(keep.Fd()))
		if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("agent shim: bind %s: %w", root, err)
		}
	}
	if err := unix.Mount("", base, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("agent shim: remount %s read-only: %w", base, err)
	}
	return nil
}

// dropBounding empties the capability bounding set of this thread; the
// agent inherits it, so no exec can ever regain a capability.
func dropBounding() error {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return fmt.Errorf("agent shim: %w", err)
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("agent shim: cap_last_cap: %w", err)
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("agent shim: drop capability %d: %w", c, err)
		}
	}
	return nil
}
