package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/hostview"
)

// The agent's view is built, not inherited. The shim, root in the agent's
// new mount namespace and pid 1 of its pid namespace, makes it before the
// agent exists:
//
//   - it joins the agent's cgroups, then takes a cgroup namespace, so every
//     agent process is born inside and /proc/self/cgroup shows "/";
//   - with NetworkNone it takes a network namespace with only loopback up;
//   - it covers the private base and every Hide path, whatever their modes;
//   - /sys becomes a read-only tmpfs with frozen copies of the few files
//     tools read (sysKeep) and an empty /sys/fs/cgroup;
//   - /proc becomes a fresh procfs with hidepid=invisible, in which process
//     entries stay live, every hostview Snapshot entry is a read-only copy
//     frozen now, and every other top-level entry is covered (default
//     deny: an entry hostview does not know is covered too);
//   - it then checks, with the agent's credentials, that nothing it hid
//     can be read, and fails closed if anything can.
//
// Because the covers sit on non-empty directories of the only procfs in
// the namespace, and the host's /proc and /sys are themselves covered, the
// kernel refuses the agent a fresh procfs or sysfs even from a user
// namespace of its own (mount_too_revealing), so the view cannot be undone
// from inside.

// shimKnobs weakens the view, for the tests' weakened twins only: each
// knob removes one control so a test can show its check then fails. The
// zero value is the production view and the only one RunShim uses.
type shimKnobs struct {
	TestOnlySkipHide       bool // do not cover Hide paths or the private base (the check still runs)
	TestOnlyLiveProc       bool // leave hostview Snapshot entries live
	TestOnlyKeepProc       bool // leave the entries the view would cover visible
	TestOnlyHostSys        bool // leave the host's /sys
	TestOnlyNoHidepid      bool // mount /proc without hidepid=invisible
	TestOnlyNoCgroupNS     bool // join the cgroups but keep the host's cgroup namespace
	TestOnlyLiveSysinfo    bool // let sysinfo(2) through to the kernel
	TestOnlySkipHideVerify bool // do not check the hidden paths as the agent
}

// sysKeep is everything of /sys the agent sees, each a read-only copy taken
// when the agent starts. Everything else of /sys is absent: it holds
// host-wide files that a sandbox moves (/sys/block/*/stat, cpufreq,
// /sys/kernel/mm counters, every cgroup file).
var sysKeep = []struct{ path, reason string }{
	{"/sys/devices/system/cpu/online", "glibc's get_nprocs (sysconf(_SC_NPROCESSORS_ONLN), so Python's os.cpu_count and nproc --all) reads it"},
	{"/sys/devices/system/cpu/possible", "glibc's get_nprocs_conf and per-CPU allocators (libnuma, jemalloc, tcmalloc) read it"},
	{"/sys/devices/system/cpu/present", "lscpu and CPU-topology libraries (hwloc) read it with online and possible"},
	{"/sys/kernel/mm/transparent_hugepage/enabled", "jemalloc and the JVM read it to pick their huge-page policy; an operator setting no sandbox can move"},
	{"/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "the Go runtime reads it at start-up to learn the huge page size"},
}

// SysKeep describes what of /sys the agent sees, for docs/security.md.
func SysKeep() string {
	var b strings.Builder
	b.WriteString("| path | why the agent keeps a frozen copy |\n|---|---|\n")
	for _, k := range sysKeep {
		fmt.Fprintf(&b, "| `%s` | %s |\n", k.path, k.reason)
	}
	b.WriteString("| `/sys/fs/cgroup` | an empty read-only tmpfs: no cgroup file of awf or the host |\n")
	return b.String()
}

// scratchDir is where, inside the /sys tmpfs that is being built, a second
// tmpfs holds the frozen /proc copies and the empty file used as a cover.
// It is detached and removed before /sys is made read-only; the bind
// mounts taken from it keep their files. Its size is a cap, not an
// allocation: each non-empty copy takes one page, and /proc/sys is most of
// them (about 250 files, plus about 130 per network interface the agent's
// namespace has: a network none agent has only lo, a host network agent
// all of the host's; 64 MiB holds some 120 interfaces).
const scratchDir = "/sys/.awf-view"

// buildView builds the agent's mounts. It runs on the shim's locked thread,
// after the cgroup and network namespaces.
func buildView(a ShimArgs, k shimKnobs) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("agent shim: make mounts private: %w", err)
	}
	keep, err := readSysKeep()
	if err != nil {
		return err
	}
	// The new /sys, still writable: it also holds the scratch while the
	// view is built.
	if err := unix.Mount("awf-sys", "/sys", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m,nr_inodes=256,mode=0755"); err != nil {
		return fmt.Errorf("agent shim: mount /sys: %w", err)
	}
	if err := os.Mkdir(scratchDir, 0o700); err != nil {
		return fmt.Errorf("agent shim: %w", err)
	}
	if err := unix.Mount("awf-view", scratchDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64m,mode=0755"); err != nil {
		return fmt.Errorf("agent shim: mount the view's scratch: %w", err)
	}
	empty := filepath.Join(scratchDir, "empty")
	if err := os.WriteFile(empty, nil, 0o444); err != nil {
		return fmt.Errorf("agent shim: %w", err)
	}
	hidden := append([]string{a.PrivateBase}, a.Hide...)
	if !k.TestOnlySkipHide {
		for _, p := range hidden {
			if err := hidePath(p, empty); err != nil {
				return err
			}
		}
	}
	if err := coverIngress(a.IngressBase, a.IngressRoot); err != nil {
		return err
	}
	if err := installAgentCLIs(SkillDirOf(a.IngressRoot), scratchDir); err != nil {
		return err
	}
	if err := buildProc(empty, k); err != nil {
		return err
	}
	if err := unix.Unmount(scratchDir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("agent shim: detach the view's scratch: %w", err)
	}
	if err := os.Remove(scratchDir); err != nil {
		return fmt.Errorf("agent shim: %w", err)
	}
	if k.TestOnlyHostSys {
		if err := unix.Unmount("/sys", unix.MNT_DETACH); err != nil {
			return fmt.Errorf("agent shim: %w", err)
		}
	} else if err := finishSys(keep); err != nil {
		return err
	}
	if !k.TestOnlySkipHideVerify {
		if err := checkHidden(a.UID, a.GID, hidden); err != nil {
			return err
		}
	}
	return nil
}

// readSysKeep reads the sysKeep files from the host's /sys; one that does
// not exist on this kernel is left out.
func readSysKeep() (map[string][]byte, error) {
	out := make(map[string][]byte, len(sysKeep))
	for _, s := range sysKeep {
		b, err := os.ReadFile(s.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("agent shim: snapshot %s: %w", s.path, err)
		}
		out[s.path] = b
	}
	return out, nil
}

// finishSys writes the frozen /sys files into the /sys tmpfs, makes it
// read-only and puts an empty read-only tmpfs on /sys/fs/cgroup.
func finishSys(keep map[string][]byte) error {
	for _, s := range sysKeep {
		b, ok := keep[s.path]
		if !ok {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
			return fmt.Errorf("agent shim: %w", err)
		}
		if err := os.WriteFile(s.path, b, 0o444); err != nil {
			return fmt.Errorf("agent shim: %w", err)
		}
	}
	if err := os.MkdirAll("/sys/fs/cgroup", 0o755); err != nil {
		return fmt.Errorf("agent shim: %w", err)
	}
	if err := unix.Mount("", "/sys", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("agent shim: remount /sys read-only: %w", err)
	}
	if err := unix.Mount("awf-cgroup", "/sys/fs/cgroup", "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=1,mode=0555"); err != nil {
		return fmt.Errorf("agent shim: cover /sys/fs/cgroup: %w", err)
	}
	return nil
}

// buildProc mounts a fresh procfs on /proc and replaces every top-level
// entry that is not a process's: a hostview Snapshot entry by a read-only
// copy frozen now, anything else by an empty read-only file or directory.
func buildProc(empty string, k shimKnobs) error {
	opts := "hidepid=invisible"
	if k.TestOnlyNoHidepid {
		opts = ""
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("agent shim: mount /proc: %w", err)
	}
	snaps := filepath.Join(scratchDir, "proc")
	if err := os.Mkdir(snaps, 0o755); err != nil {
		return fmt.Errorf("agent shim: %w", err)
	}
	des, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("agent shim: list /proc: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		p := "/proc/" + name
		if hostview.LiveProcEntry(name) {
			continue
		}
		if de.Type()&os.ModeSymlink != 0 {
			// mounts and net point into self, which the namespaces confine.
			// A link elsewhere cannot be covered without following it.
			t, err := os.Readlink(p)
			if err != nil || !strings.HasPrefix(t, "self/") {
				return fmt.Errorf("agent shim: /proc/%s: a link the view does not know (%q)", name, t)
			}
			continue
		}
		if e, ok := hostview.Lookup(p); ok && e.Action == hostview.Snapshot {
			if k.TestOnlyLiveProc {
				continue
			}
			dst := filepath.Join(snaps, name)
			if err := hostview.Copy(p, dst); err != nil {
				return fmt.Errorf("agent shim: snapshot %s: %w", p, err)
			}
			if err := bindReadOnly(dst, p); err != nil {
				return err
			}
			continue
		}
		if k.TestOnlyKeepProc {
			continue
		}
		if err := coverPath(p, empty); err != nil {
			return err
		}
	}
	return nil
}

// hidePath covers p in the agent's view. It resolves p once, following
// symbolic links (but no /proc magic link), and mounts on the object it
// found through that descriptor, so a path rewritten after the lookup
// cannot move the cover. A path that does not exist is not hidden.
func hidePath(p, empty string) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent shim: hide %s: %w", p, err)
	}
	defer unix.Close(fd)
	if err := coverFD(fd, empty); err != nil {
		return fmt.Errorf("agent shim: hide %s: %w", p, err)
	}
	return nil
}

// coverPath covers p, a path the shim owns (an entry of its fresh /proc).
func coverPath(p, empty string) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("agent shim: cover %s: %w", p, err)
	}
	defer unix.Close(fd)
	if err := coverFD(fd, empty); err != nil {
		return fmt.Errorf("agent shim: cover %s: %w", p, err)
	}
	return nil
}

// coverFD mounts, on the object fd refers to, an empty read-only tmpfs if
// it is a directory, else a read-only bind of the empty file.
func coverFD(fd int, empty string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	var mfd int
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		mfd, err = emptyTmpfs()
	} else {
		mfd, err = readOnlyTree(empty)
	}
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	return unix.MoveMount(mfd, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// bindReadOnly mounts a read-only bind of src on dst.
func bindReadOnly(src, dst string) error {
	mfd, err := readOnlyTree(src)
	if err != nil {
		return fmt.Errorf("agent shim: bind %s: %w", dst, err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("agent shim: bind %s: %w", dst, err)
	}
	return nil
}

// viewAttrs are the attributes of every mount the view adds.
const viewAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

// readOnlyTree returns a detached read-only bind of src.
func readOnlyTree(src string) (int, error) {
	mfd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return -1, fmt.Errorf("open_tree %s: %w", src, err)
	}
	if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: viewAttrs}); err != nil {
		unix.Close(mfd)
		return -1, fmt.Errorf("mount_setattr %s: %w", src, err)
	}
	return mfd, nil
}

// emptyTmpfs returns a detached, empty, read-only tmpfs.
func emptyTmpfs() (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"source", "awf-hidden"}, {"size", "4k"}, {"nr_inodes", "1"}, {"mode", "0555"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("tmpfs %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("tmpfs create: %w", err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, viewAttrs)
	if err != nil {
		return -1, fmt.Errorf("fsmount tmpfs: %w", err)
	}
	return mfd, nil
}

// checkHidden proves, with the agent's credentials, that no hidden path can
// be read: each is absent, refused, an empty directory or an empty file,
// and none accepts a connection. It runs on a throwaway thread that drops
// to the agent's ids alone (raw setres*id calls affect only the calling
// thread) and is never unlocked, so the Go runtime ends the thread with the
// goroutine instead of reusing it.
func checkHidden(uid, gid int, paths []string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			errc <- fmt.Errorf("agent shim: check as the agent: setgroups: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			errc <- fmt.Errorf("agent shim: check as the agent: setresgid: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			errc <- fmt.Errorf("agent shim: check as the agent: setresuid: %w", e)
			return
		}
		for _, p := range paths {
			if err := unreadable(p); err != nil {
				errc <- fmt.Errorf("agent shim: %s is still visible to the agent (%v); refusing to start it", p, err)
				return
			}
		}
		errc <- nil
	}()
	return <-errc
}

// unreadable returns nil if p, opened as the caller, yields nothing.
func unreadable(p string) error {
	if c, err := net.Dial("unix", p); err == nil {
		c.Close()
		return errors.New("it accepts connections")
	}
	// O_NONBLOCK: a FIFO must not hold the shim; O_NOCTTY: a terminal must
	// not become the shim's.
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // absent or refused
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		names, err := f.Readdirnames(1)
		if len(names) > 0 {
			return fmt.Errorf("it lists %q", names[0])
		}
		if err != nil && err != io.EOF {
			return nil // listing refused
		}
		return nil
	}
	var b [1]byte
	if n, _ := f.Read(b[:]); n > 0 {
		return errors.New("it can be read")
	}
	return nil
}

// joinCgroups moves the shim (all its threads) into each cgroup directory,
// before it starts anything, so every agent process is born inside. Each
// must be a cgroup (v1 or v2) directory.
func joinCgroups(dirs []string) error {
	for _, d := range dirs {
		var fs unix.Statfs_t
		if err := unix.Statfs(d, &fs); err != nil {
			return fmt.Errorf("agent shim: cgroup %s: %w", d, err)
		}
		if fs.Type != unix.CGROUP_SUPER_MAGIC && fs.Type != unix.CGROUP2_SUPER_MAGIC {
			return fmt.Errorf("agent shim: %s is not a cgroup directory", d)
		}
		f, err := os.OpenFile(filepath.Join(d, "cgroup.procs"), os.O_WRONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("agent shim: join cgroup %s: %w", d, err)
		}
		// "0" is the writer itself, whatever pid namespace it is in.
		_, err = f.WriteString("0")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("agent shim: join cgroup %s: %w", d, err)
		}
	}
	return nil
}

// enterCgroupNS gives the calling thread (and everything it starts) a new
// cgroup namespace rooted at its cgroups, then checks that it shows "/".
// It reads /proc/thread-self/cgroup: the namespace is this thread's.
func enterCgroupNS() error {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("agent shim: cgroup namespace: %w", err)
	}
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return fmt.Errorf("agent shim: cgroup namespace: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 || f[2] != "/" {
			return fmt.Errorf("agent shim: cgroup namespace: %q is not at its root", sc.Text())
		}
	}
	return nil
}

// enterNetworkNone gives the calling thread (and everything it starts) a
// new network namespace, brings loopback up and checks that nothing else
// is there.
func enterNetworkNone() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("agent shim: network namespace: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("agent shim: loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("agent shim: loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("agent shim: loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("agent shim: loopback up: %w", err)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("agent shim: network namespace: %w", err)
	}
	if len(ifs) != 1 || ifs[0].Name != "lo" || ifs[0].Flags&net.FlagUp == 0 {
		names := make([]string, len(ifs))
		for i, fi := range ifs {
			names[i] = fi.Name + "/" + strconv.Itoa(int(fi.Flags))
		}
		return fmt.Errorf("agent shim: network none: want only lo up, have %v", names)
	}
	return nil
}
