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

// ShimArgs is what the agent shim needs, passed on its command line (no
// secret). The zero value of each field added after IngressRoot keeps the
// behaviour awf had before it: nothing extra hidden, the host network, no
// cgroup to join.
type ShimArgs struct {
	UID, GID    int
	PrivateBase string
	IngressBase string
	IngressRoot string // "" when bounded queries are disabled

	// Hide lists absolute paths covered in the agent's view whatever their
	// permissions: a directory by an empty read-only tmpfs, anything else by
	// an empty read-only file. A path that does not exist is ignored; a
	// symbolic link is followed and its target covered.
	Hide []string
	// Network is NetworkHost ("" means the same) or NetworkNone.
	Network string
	// Cgroups are the agent's cgroup directories, one per hierarchy; the
	// shim joins each before it starts anything.
	Cgroups []string
	// APIProxyPort, with NetworkNone, has the shim listen on
	// 127.0.0.1:APIProxyPort inside the agent's network namespace and send
	// that listener over APIProxyHandoff (its fd 3) to the API proxy, which
	// serves it from outside. 0 (the default) means no such listener.
	APIProxyPort int
	// APIProxyHandoff is the shim's end of the hand-off socket; RunAgent
	// passes it as fd 3. It is not part of the command line.
	APIProxyHandoff *os.File
}

// The values of ShimArgs.Network.
const (
	// NetworkHost leaves the agent in the host's network namespace.
	NetworkHost = "host"
	// NetworkNone gives the agent a new network namespace with only
	// loopback up. The broker socket is a path, so it still works.
	NetworkNone = "none"
)

// The option prefixes of the shim's command line, after the five
// positional arguments.
const (
	shimOptHide    = "--hide="
	shimOptNetwork = "--network="
	shimOptCgroup  = "--cgroup="
	shimOptProxy   = "--api-proxy-port="
)

// Argv renders the shim's arguments after "awf run --agent-shim": the five
// positional ones, then one option per Hide path, Network if set, and one
// option per cgroup, in that order.
func (a ShimArgs) Argv() []string {
	v := []string{strconv.Itoa(a.UID), strconv.Itoa(a.GID), a.PrivateBase, a.IngressBase, a.IngressRoot}
	for _, p := range a.Hide {
		v = append(v, shimOptHide+p)
	}
	if a.Network != "" {
		v = append(v, shimOptNetwork+a.Network)
	}
	if a.APIProxyPort != 0 {
		v = append(v, shimOptProxy+strconv.Itoa(a.APIProxyPort))
	}
	for _, p := range a.Cgroups {
		v = append(v, shimOptCgroup+p)
	}
	return v
}

// ParseShimArgs reverses Argv. It is strict: ids are positive decimals,
// every path is absolute (and each option's path clean), options come in Argv's order, Network
// appears at most once with a known value, and nothing else is accepted.
func ParseShimArgs(v []string) (ShimArgs, error) {
	if len(v) < 5 {
		return ShimArgs{}, errors.New("agent shim: want at least 5 arguments")
	}
	uid, err1 := strconv.Atoi(v[0])
	gid, err2 := strconv.Atoi(v[1])
	if err1 != nil || err2 != nil || uid <= 0 || gid <= 0 || v[0] != strconv.Itoa(uid) || v[1] != strconv.Itoa(gid) {
		return ShimArgs{}, errors.New("agent shim: bad uid/gid")
	}
	for _, p := range v[2:4] {
		if !filepath.IsAbs(p) {
			return ShimArgs{}, errors.New("agent shim: paths must be absolute")
		}
	}
	if v[4] != "" && !filepath.IsAbs(v[4]) {
		return ShimArgs{}, errors.New("agent shim: paths must be absolute")
	}
	a := ShimArgs{UID: uid, GID: gid, PrivateBase: v[2], IngressBase: v[3], IngressRoot: v[4]}
	// stage is the last option kind seen: 0 hide, 1 network, 2 cgroup.
	stage := 0
	for _, o := range v[5:] {
		switch {
		case strings.HasPrefix(o, shimOptHide) && stage == 0:
			p := strings.TrimPrefix(o, shimOptHide)
			if !cleanAbs(p) {
				return ShimArgs{}, fmt.Errorf("agent shim: hide %q: not an absolute clean path", p)
			}
			a.Hide = append(a.Hide, p)
		case strings.HasPrefix(o, shimOptNetwork) && stage == 0:
			n := strings.TrimPrefix(o, shimOptNetwork)
			if n != NetworkHost && n != NetworkNone {
				return ShimArgs{}, fmt.Errorf("agent shim: network %q: want %q or %q", n, NetworkHost, NetworkNone)
			}
			a.Network, stage = n, 1
		case strings.HasPrefix(o, shimOptProxy) && stage <= 1 && a.APIProxyPort == 0:
			n, err := strconv.Atoi(strings.TrimPrefix(o, shimOptProxy))
			if err != nil || n < 1 || n > 65535 || o != shimOptProxy+strconv.Itoa(n) {
				return ShimArgs{}, fmt.Errorf("agent shim: api proxy port %q: want 1..65535", o)
			}
			a.APIProxyPort, stage = n, 1
		case strings.HasPrefix(o, shimOptCgroup):
			p := strings.TrimPrefix(o, shimOptCgroup)
			if !cleanAbs(p) {
				return ShimArgs{}, fmt.Errorf("agent shim: cgroup %q: not an absolute clean path", p)
			}
			a.Cgroups, stage = append(a.Cgroups, p), 2
		default:
			return ShimArgs{}, fmt.Errorf("agent shim: unexpected argument %q", o)
		}
	}
	return a, nil
}

// ParseShimCommand splits "ARGS… -- CMD…" (what follows "awf run
// --agent-shim") into the shim's arguments and the agent's command. No
// shim argument can be "--", so the first one ends them.
func ParseShimCommand(v []string) (ShimArgs, []string, error) {
	for i, s := range v {
		if s != "--" {
			continue
		}
		if i+1 == len(v) {
			return ShimArgs{}, nil, errors.New("agent shim: no command after --")
		}
		a, err := ParseShimArgs(v[:i])
		if err != nil {
			return ShimArgs{}, nil, err
		}
		return a, v[i+1:], nil
	}
	return ShimArgs{}, nil, errors.New("agent shim: no -- before the command")
}

// cleanAbs reports whether p is an absolute path in its shortest form, so
// that two spellings of one path cannot both pass.
func cleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// RunShim is pid 1 of the agent's new pid namespace, root in its new mount
// namespace. It joins the agent's cgroups and takes a cgroup namespace,
// takes an empty network namespace when asked, builds the agent's view
// (see buildView: the private base and every Hide path covered, the
// ingress base reduced to this run's directory, a built /sys and /proc),
// empties the capability bounding set, sets no_new_privs, and then runs
// argv as the agent user with its environment. It reaps every child and
// returns argv's exit status (128+signal when killed).
func RunShim(a ShimArgs, argv []string) (int, error) {
	return runShim(a, argv, shimKnobs{})
}

func runShim(a ShimArgs, argv []string, k shimKnobs) (int, error) {
	if len(argv) == 0 {
		return 127, errors.New("agent shim: no command")
	}
	// Namespaces, mounts, prctl and the fork all happen on this thread; it
	// is never unlocked, so no other goroutine runs with its state.
	runtime.LockOSThread()
	// First, so that every process the agent ever starts is born inside.
	if err := joinCgroups(a.Cgroups); err != nil {
		return 1, err
	}
	if !k.TestOnlyNoCgroupNS {
		if err := enterCgroupNS(); err != nil {
			return 1, err
		}
	}
	switch a.Network {
	case "", NetworkHost:
		if a.APIProxyPort != 0 {
			return 1, errors.New("agent shim: an api proxy listener is handed off only with network none")
		}
	case NetworkNone:
		if err := enterNetworkNone(); err != nil {
			return 1, err
		}
		if a.APIProxyPort != 0 {
			if err := handOffProxyListener(os.NewFile(shimHandoffFD, "api-proxy-handoff"), a.APIProxyPort); err != nil {
				return 1, err
			}
		}
	default:
		return 1, fmt.Errorf("agent shim: network %q: want %q or %q", a.Network, NetworkHost, NetworkNone)
	}
	// Frozen with the /proc copies, before any mount, so the agent's
	// sysinfo and its /proc agree.
	si, err := freezeSysinfo()
	if err != nil {
		return 1, err
	}
	if err := buildView(a, k); err != nil {
		return 1, err
	}
	if err := dropBounding(); err != nil {
		return 1, err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 1, fmt.Errorf("agent shim: no_new_privs: %w", err)
	}
	if !k.TestOnlyLiveSysinfo {
		// The filter also refuses pidfds (see agentview_sysinfo.go). The
		// shim starts no process before this point, so Go's own pidfd
		// probe runs under the filter, finds none, and os.StartProcess
		// below does not ask clone for one.
		listener, err := installSysinfoFilter()
		if err != nil {
			return 1, err
		}
		abi, _ := sysinfoABIFor(runtime.GOARCH)
		go serveSysinfo(listener, si, abi)
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
