package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/policy"
)

// The tests of the agent's view run the real shim: the test binary is its
// own "awf" (TestMain answers "run --agent-shim …" by calling runShim, with
// the knobs named in agentViewKnobsEnv for a weakened twin), and its own
// agent (agentViewProbeEnv makes it run the probe, as the agent user).

const (
	agentViewKnobsEnv = "AWF_TESTONLY_AGENTVIEW_KNOBS"
	agentViewProbeEnv = "AWF_TESTONLY_AGENTVIEW_PROBE"
	agentUID          = 65534
)

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "run" && os.Args[2] == "--agent-shim" {
		os.Exit(testShimMain(os.Args[3:]))
	}
	if os.Getenv(agentViewProbeEnv) != "" {
		os.Exit(probeMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func testShimMain(args []string) int {
	a, argv, err := ParseShimCommand(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	var k shimKnobs
	if s := os.Getenv(agentViewKnobsEnv); s != "" {
		if err := json.Unmarshal([]byte(s), &k); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 125
		}
	}
	code, err := runShim(a, argv, k)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

// probeFile is what the agent got from one path.
type probeFile struct {
	Err   string   `json:",omitempty"` // open or read error
	Len   int      `json:",omitempty"` // bytes read from a file
	Names []string `json:",omitempty"` // entries of a directory
}

// probeCmd is one command the agent ran.
type probeCmd struct {
	Err string `json:",omitempty"`
	Out string `json:",omitempty"`
}

// probeReport is everything the agent saw.
type probeReport struct {
	Read     map[string]probeFile
	Connect  map[string]string // "" when it connected
	Ifaces   []string
	NetNS    string // the link /proc/self/ns/net
	Cgroup   string
	Pids     map[string]string // pid → Uid line of its status
	Cmd      map[string]probeCmd
	Counters [2]map[string]string // before and after the host's load
}

// counterFiles are read twice by the "counters" probe.
var counterFiles = []string{
	"/proc/stat", "/proc/loadavg", "/proc/meminfo", "/proc/vmstat", "/proc/uptime",
	"/proc/schedstat", "/proc/interrupts", "/proc/softirqs", "/proc/diskstats",
	"/proc/pressure/cpu", "/proc/pressure/memory", "/proc/sys/fs/file-nr",
	"/proc/sys/fs/inode-nr", "/proc/sys/fs/dentry-state", "/proc/sys/kernel/random/entropy_avail",
}

// probeMain runs, as the agent, the actions named in args and prints one
// JSON probeReport. "counters" prints "ready" first and waits for a line on
// stdin between its two readings.
func probeMain(args []string) int {
	r := probeReport{Read: map[string]probeFile{}, Connect: map[string]string{}, Pids: map[string]string{}, Cmd: map[string]probeCmd{}}
	for _, a := range args {
		verb, arg, _ := strings.Cut(a, "=")
		switch verb {
		case "read":
			r.Read[arg] = probeRead(arg)
		case "connect":
			r.Connect[arg] = ""
			if c, err := net.Dial("unix", arg); err != nil {
				r.Connect[arg] = err.Error()
			} else {
				c.Close()
			}
		case "ifaces":
			ifs, err := net.Interfaces()
			if err != nil {
				r.Ifaces = []string{"error: " + err.Error()}
			}
			for _, i := range ifs {
				r.Ifaces = append(r.Ifaces, i.Name)
			}
		case "netns":
			r.NetNS, _ = os.Readlink("/proc/self/ns/net")
		case "cgroup":
			b, err := os.ReadFile("/proc/self/cgroup")
			r.Cgroup = string(b)
			if err != nil {
				r.Cgroup = err.Error()
			}
		case "pids":
			des, _ := os.ReadDir("/proc")
			for _, de := range des {
				if _, err := strconv.Atoi(de.Name()); err != nil {
					continue
				}
				b, _ := os.ReadFile("/proc/" + de.Name() + "/status")
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "Uid:") {
						r.Pids[de.Name()] = strings.Join(strings.Fields(l)[1:], " ")
					}
				}
			}
		case "cmd":
			name, line, _ := strings.Cut(arg, ":")
			out, err := exec.Command("/bin/sh", "-c", line).CombinedOutput()
			c := probeCmd{Out: string(out)}
			if err != nil {
				c.Err = err.Error()
			}
			r.Cmd[name] = c
		case "sysinfo-loop":
			n, _ := strconv.Atoi(arg)
			var si unix.Sysinfo_t
			start := time.Now()
			for i := 0; i < n; i++ {
				if err := unix.Sysinfo(&si); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
			}
			r.Cmd[verb] = probeCmd{Out: strconv.FormatInt(int64(time.Since(start)), 10)}
		case "shmget":
			key, _ := strconv.Atoi(arg)
			r.Connect["shm:"+arg] = ""
			if _, err := unix.SysvShmGet(key, 0, 0); err != nil {
				r.Connect["shm:"+arg] = err.Error()
			}
		case "pidfd":
			// Every way the filter closes to a pidfd, whose inode number
			// counts the host's tasks: "" means the agent got one.
			r.Connect["pidfd_open"] = ""
			if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
				r.Connect["pidfd_open"] = err.Error()
			} else {
				unix.Close(fd)
			}
			r.Connect["clone3"] = ""
			if _, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0); e == unix.ENOSYS {
				r.Connect["clone3"] = e.Error()
			}
			r.Connect["SO_PEERPIDFD"] = ""
			if fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0); err != nil {
				r.Connect["SO_PEERPIDFD"] = err.Error()
			} else {
				if fd, err := unix.GetsockoptInt(fds[0], unix.SOL_SOCKET, soPeerPidfd); err != nil {
					r.Connect["SO_PEERPIDFD"] = err.Error()
				} else {
					unix.Close(fd)
				}
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
		case "counters":
			r.Counters[0] = readCounters()
			fmt.Println("ready")
			if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			r.Counters[1] = readCounters()
		default:
			fmt.Fprintf(os.Stderr, "probe: unknown action %q\n", a)
			return 1
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

func probeRead(p string) probeFile {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return probeFile{Err: err.Error()}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		names, err := f.Readdirnames(-1)
		sort.Strings(names)
		pf := probeFile{Names: names}
		if err != nil {
			pf.Err = err.Error()
		}
		return pf
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	pf := probeFile{Len: len(b)}
	if err != nil {
		pf.Err = err.Error()
	}
	return pf
}

func readCounters() map[string]string {
	m := map[string]string{}
	for _, p := range counterFiles {
		b, err := os.ReadFile(p)
		if err != nil {
			m[p] = "error: " + err.Error()
			continue
		}
		m[p] = string(b)
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		m["sysinfo"] = "error: " + err.Error()
	} else {
		// Uptime is left out: it is the clock, which the agent reads anyway.
		m["sysinfo"] = fmt.Sprint(si.Loads, si.Freeram, si.Sharedram, si.Bufferram, si.Freeswap, si.Procs, si.Freehigh)
	}
	return m
}

// viewFixture is a throwaway run laid out as awf run lays out a real one,
// with everything the agent must not see made readable by everyone, so
// that only the view stands between the agent and it.
type viewFixture struct {
	dir      string // 0755, holds everything
	probe    string // a copy of the test binary the agent user can run
	args     ShimArgs
	secret   string   // a file in the private base (0644 in a 0755 base, on purpose)
	hidden   []string // files under Hide, each readable by everyone
	sockets  []string // listening Unix sockets under Hide, open to everyone
	broker   string   // the run's ingress socket, which must still connect
	other    string   // another run's ingress file
	cgroups  []string // the agent's test cgroups
	cgFiles  []string // cgroup files readable by everyone on the host
	sysFiles []string // host /sys files outside sysKeep, readable by everyone
	netns    string   // the test's network namespace
}

func newViewFixture(t testing.TB) *viewFixture {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "the agent view tests run the real shim and need root")
	dir, err := os.MkdirTemp("", "awf-agentview-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	fx := &viewFixture{dir: dir}
	fx.netns, err = os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("not for the agent\n"), mode))
		return p
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	fx.probe = filepath.Join(dir, "probe")
	require.NoError(t, os.WriteFile(fx.probe, b, 0o755))

	fx.secret = mk("private/run/secret", 0o644)
	src := mk("source/README", 0o644)
	target := mk("target/file", 0o644)
	require.NoError(t, os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "link")))
	file := mk("credentials/token", 0o644)
	fileTarget := mk("credentials/other-token", 0o644)
	require.NoError(t, os.Symlink(fileTarget, filepath.Join(dir, "token-link")))
	fx.hidden = []string{src, target, file, fileTarget}
	listen := func(rel string) string {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		l, err := net.Listen("unix", p)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		require.NoError(t, os.Chmod(p, 0o666))
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return p
	}
	engine := listen("engine/docker.sock")
	fx.sockets = []string{engine}
	fx.broker = listen("ingress/run/broker.sock")
	fx.other = mk("ingress/other/broker.sock", 0o644)

	fx.cgroups = testCgroups(t)
	for _, cg := range fx.cgroups {
		fx.cgFiles = append(fx.cgFiles, filepath.Join(cg, "cgroup.procs"))
	}
	for _, p := range []string{"/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/cgroup.stat", "/sys/fs/cgroup/unified/cgroup.stat"} {
		if _, err := os.Stat(p); err == nil {
			fx.cgFiles = append(fx.cgFiles, p)
		}
	}
	for _, p := range []string{"/sys/kernel/mm/transparent_hugepage/khugepaged/pages_collapsed", "/sys/devices/system/cpu/cpu0/topology/core_id", "/sys/kernel/uevent_seqnum"} {
		if _, err := os.Stat(p); err == nil {
			fx.sysFiles = append(fx.sysFiles, p)
		}
	}
	require.NotEmpty(t, fx.sysFiles, "no host /sys file to probe")

	fx.args = ShimArgs{
		UID: agentUID, GID: agentUID,
		PrivateBase: filepath.Join(dir, "private"),
		IngressBase: filepath.Join(dir, "ingress"),
		IngressRoot: filepath.Join(dir, "ingress", "run"),
		Hide: []string{filepath.Join(dir, "source"), engine, filepath.Join(dir, "link"), filepath.Join(dir, "absent"),
			file, filepath.Join(dir, "token-link")},
		Network: NetworkNone,
		Cgroups: fx.cgroups,
	}
	return fx
}

// testCgroups makes one empty cgroup per hierarchy the agent will be
// frozen in (the v1 freezer and the v2 tree, or the one v2 tree) and
// removes them when the test ends.
func testCgroups(t testing.TB) []string {
	t.Helper()
	name := fmt.Sprintf("awf-agentview-test-%d", os.Getpid())
	var roots []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		roots = []string{"/sys/fs/cgroup"}
	} else {
		for _, r := range []string{"/sys/fs/cgroup/freezer", "/sys/fs/cgroup/unified"} {
			if _, err := os.Stat(r); err == nil {
				roots = append(roots, r)
			}
		}
	}
	require.NotEmpty(t, roots, "no cgroup hierarchy to put the agent in")
	var out []string
	for _, r := range roots {
		d := filepath.Join(r, name)
		require.NoError(t, os.Mkdir(d, 0o755))
		t.Cleanup(func() {
			// The shim's processes are gone when RunAgent returns; allow the
			// kernel a moment to release them.
			for i := 0; i < 50; i++ {
				if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Errorf("cgroup %s left behind", d)
		})
		out = append(out, d)
	}
	return out
}

// runTwin runs the probe with actions as the agent user but outside RunAgent
// and the shim: the weakened twin a test compares the agent's view with.
func (fx *viewFixture) runTwin(t testing.TB, actions ...string) probeReport {
	t.Helper()
	cmd := exec.Command(fx.probe, actions...)
	cmd.Env = []string{agentViewProbeEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: agentUID, Gid: agentUID, Groups: []uint32{}}}
	out, err := cmd.Output()
	require.NoError(t, err)
	var r probeReport
	require.NoError(t, json.Unmarshal(out, &r))
	return r
}

// runProbe runs the probe with actions through RunAgent and the real shim.
// onReady, if set, is called when the probe prints "ready"; the probe then
// goes on. It returns the report, or the shim's exit code and stderr.
func (fx *viewFixture) runProbe(t testing.TB, a ShimArgs, k shimKnobs, onReady func(), actions ...string) (probeReport, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kb, err := json.Marshal(k)
	require.NoError(t, err)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/", agentViewProbeEnv + "=1", agentViewKnobsEnv + "=" + string(kb)}
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	defer stdinR.Close()
	defer stdinW.Close()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	var report probeReport
	var wg sync.WaitGroup
	wg.Add(1)
	var readErr error
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "ready" {
				if onReady != nil {
					onReady()
				}
				_, _ = stdinW.Write([]byte("go\n"))
				continue
			}
			readErr = json.Unmarshal([]byte(line), &report)
		}
	}()
	exe, err := os.Executable()
	require.NoError(t, err)
	code, err := RunAgent(ctx, exe, a, env, append([]string{fx.probe}, actions...), stdinR, outW, &stderr)
	outW.Close()
	wg.Wait()
	require.NoError(t, err)
	if code == 0 {
		require.NoError(t, readErr, "probe output; stderr: %s", stderr.String())
	}
	return report, code, stderr.String()
}

// viewCheck is one control of the agent's view, as the agent sees it.
type viewCheck struct {
	name string
	// weaken removes the control, for the weakened twin.
	weaken func(a *ShimArgs, k *shimKnobs)
	// check returns nil when the control holds in r.
	check func(fx *viewFixture, r probeReport) error
	// blocked, if set, returns why the attack cannot be made on this host
	// at all (then neither the check nor its twin can say anything).
	blocked func(r probeReport) string
}

func unreadableFile(f probeFile) bool { return f.Err != "" || f.Len == 0 && len(f.Names) == 0 }

var noHide = func(a *ShimArgs, k *shimKnobs) { k.TestOnlySkipHide, k.TestOnlySkipHideVerify = true, true }

// hostSys leaves the host's /sys in the view: the weakened twin the /sys
// and cgroup checks must fail on.
var hostSys = func(a *ShimArgs, k *shimKnobs) { k.TestOnlyHostSys = true }

// noneVisible fails on the first of paths the agent could read.
func noneVisible(r probeReport, paths []string) error {
	for _, p := range paths {
		if f := r.Read[p]; f.Err == "" {
			return fmt.Errorf("%s is visible (%d bytes)", p, f.Len)
		}
	}
	return nil
}

var viewChecks = []viewCheck{
	{"private base", noHide, func(fx *viewFixture, r probeReport) error {
		if f := r.Read[fx.secret]; !unreadableFile(f) {
			return fmt.Errorf("read %d bytes of the secret", f.Len)
		}
		if f := r.Read[fx.args.PrivateBase]; len(f.Names) > 0 {
			return fmt.Errorf("private base lists %v", f.Names)
		}
		return nil
	}, nil},
	{"hidden files (a 0755 local source, a file, each behind a symlink too)", noHide, func(fx *viewFixture, r probeReport) error {
		for _, p := range fx.hidden {
			if f := r.Read[p]; !unreadableFile(f) {
				return fmt.Errorf("read %d bytes of %s", f.Len, p)
			}
		}
		return nil
	}, nil},
	{"hidden engine socket", noHide, func(fx *viewFixture, r probeReport) error {
		for _, p := range fx.sockets {
			if r.Connect[p] == "" {
				return fmt.Errorf("connected to %s", p)
			}
		}
		return nil
	}, nil},
	{"the run's broker socket still connects", func(a *ShimArgs, k *shimKnobs) {
		a.Hide = append(a.Hide, filepath.Join(a.IngressRoot, "broker.sock"))
	}, func(fx *viewFixture, r probeReport) error {
		if e := r.Connect[fx.broker]; e != "" {
			return fmt.Errorf("broker socket: %s", e)
		}
		return nil
	}, nil},
	{"other runs' ingress", func(a *ShimArgs, k *shimKnobs) {
		a.IngressBase = filepath.Join(filepath.Dir(a.IngressBase), "elsewhere")
	}, func(fx *viewFixture, r probeReport) error {
		if f := r.Read[fx.other]; f.Err == "" {
			return fmt.Errorf("another run's ingress is visible (%d bytes)", f.Len)
		}
		return nil
	}, nil},
	{"cgroup files", hostSys, func(fx *viewFixture, r probeReport) error {
		if f := r.Read["/sys/fs/cgroup"]; len(f.Names) > 0 {
			return fmt.Errorf("/sys/fs/cgroup lists %v", f.Names)
		}
		return noneVisible(r, fx.cgFiles)
	}, nil},
	{"host /sys files", hostSys, func(fx *viewFixture, r probeReport) error {
		if err := noneVisible(r, fx.sysFiles); err != nil {
			return err
		}
		for _, s := range sysKeep {
			host, err := os.ReadFile(s.path)
			if err != nil {
				continue
			}
			if f := r.Read[s.path]; f.Len != len(host) {
				return fmt.Errorf("%s: the agent read %d bytes (%s), the host has %d", s.path, f.Len, f.Err, len(host))
			}
		}
		return nil
	}, nil},
	{"kernel files of /proc are empty", func(a *ShimArgs, k *shimKnobs) { k.TestOnlyKeepProc = true }, func(fx *viewFixture, r probeReport) error {
		for _, name := range procKernelFiles {
			f := r.Read["/proc/"+name]
			if f.Len > 0 || len(f.Names) > 0 {
				return fmt.Errorf("/proc/%s shows %d bytes, %d entries", name, f.Len, len(f.Names))
			}
		}
		return nil
	}, nil},
	{"network none leaves only lo", func(a *ShimArgs, k *shimKnobs) { a.Network = NetworkHost }, func(fx *viewFixture, r probeReport) error {
		if len(r.Ifaces) != 1 || r.Ifaces[0] != "lo" {
			return fmt.Errorf("interfaces %v", r.Ifaces)
		}
		// A host with only loopback looks the same by names.
		if r.NetNS == "" || r.NetNS == fx.netns {
			return fmt.Errorf("the agent is in the host's network namespace %s", r.NetNS)
		}
		return nil
	}, nil},
	{"cgroup namespace", func(a *ShimArgs, k *shimKnobs) { k.TestOnlyNoCgroupNS = true }, func(fx *viewFixture, r probeReport) error {
		lines := strings.Split(strings.TrimSpace(r.Cgroup), "\n")
		for _, l := range lines {
			if !strings.HasSuffix(l, ":/") {
				return fmt.Errorf("/proc/self/cgroup: %q", l)
			}
		}
		if len(lines) == 0 || lines[0] == "" {
			return errors.New("/proc/self/cgroup is empty")
		}
		return nil
	}, nil},
	{"no process but the agent's", func(a *ShimArgs, k *shimKnobs) { k.TestOnlyNoHidepid = true }, func(fx *viewFixture, r probeReport) error {
		if len(r.Pids) == 0 {
			return errors.New("the agent sees no process, not even itself")
		}
		want := strings.Repeat(strconv.Itoa(agentUID)+" ", 4)
		for pid, uid := range r.Pids {
			if uid+" " != want {
				return fmt.Errorf("pid %s (uid %s) is visible", pid, uid)
			}
		}
		return nil
	}, nil},
	{"no fresh procfs or sysfs from a user namespace", func(a *ShimArgs, k *shimKnobs) {
		k.TestOnlyKeepProc, k.TestOnlyLiveProc, k.TestOnlyHostSys = true, true, true
	}, func(fx *viewFixture, r probeReport) error {
		for _, name := range []string{"mount-proc", "mount-sys"} {
			if c := r.Cmd[name]; c.Err == "" {
				return fmt.Errorf("%s succeeded: %s", name, c.Out)
			}
		}
		return nil
	}, func(r probeReport) string {
		if c := r.Cmd["userns"]; c.Err != "" {
			return "the agent user cannot create a user namespace on this host (" + strings.TrimSpace(c.Out) + ")"
		}
		return ""
	}},
}

// procKernelFiles are kernel entries of /proc that the view must show empty
// (each readable by everyone on the host, or root-only and listed anyway).
var procKernelFiles = []string{
	"kcore", "kmsg", "kallsyms", "timer_list", "sched_debug", "keys", "key-users", "sysrq-trigger",
	"kpagecount", "kpageflags", "kpagecgroup", "cgroups", "version", "cmdline", "filesystems",
	"modules", "slabinfo", "vmallocinfo", "pagetypeinfo", "iomem", "ioports", "devices", "misc",
	"consoles", "crypto", "execdomains", "sysvipc", "irq", "bus", "driver", "tty", "fs", "acpi",
}

func (fx *viewFixture) viewActions() []string {
	var acts []string
	for _, p := range append(append([]string{fx.secret, fx.args.PrivateBase, fx.other, "/sys/fs/cgroup"}, fx.hidden...), append(fx.cgFiles, fx.sysFiles...)...) {
		acts = append(acts, "read="+p)
	}
	for _, s := range sysKeep {
		acts = append(acts, "read="+s.path)
	}
	for _, n := range procKernelFiles {
		acts = append(acts, "read=/proc/"+n)
	}
	for _, p := range append([]string{fx.broker}, fx.sockets...) {
		acts = append(acts, "connect="+p)
	}
	return append(acts, "ifaces", "netns", "cgroup", "pids",
		"cmd=userns:unshare --user --map-root-user true 2>&1",
		"cmd=mount-proc:unshare --user --map-root-user --pid --fork --mount mount -t proc proc /tmp 2>&1",
		"cmd=mount-sys:unshare --user --map-root-user --net --mount mount -t sysfs sysfs /tmp 2>&1")
}

// TestAgentViewControls runs the probe once in the real view, where every
// check must hold, and once per weakened twin, where its check must fail.
func TestAgentViewControls(t *testing.T) {
	fx := newViewFixture(t)
	acts := fx.viewActions()
	r, code, stderr := fx.runProbe(t, fx.args, shimKnobs{}, nil, acts...)
	require.Equal(t, 0, code, "shim: %s", stderr)
	if b, err := json.MarshalIndent(r, "", " "); err == nil {
		t.Logf("the agent's view: %s", b)
	}
	for _, c := range viewChecks {
		t.Run(c.name, func(t *testing.T) {
			if c.blocked != nil {
				if why := c.blocked(r); why != "" {
					t.Skip("BLOCKED: " + why)
				}
			}
			assert.NoError(t, c.check(fx, r))
			a := fx.args
			a.Hide = append([]string(nil), a.Hide...)
			var k shimKnobs
			c.weaken(&a, &k)
			wr, code, stderr := fx.runProbe(t, a, k, nil, acts...)
			require.Equal(t, 0, code, "weakened shim: %s", stderr)
			err := c.check(fx, wr)
			assert.Error(t, err, "the weakened twin must show the check fails without its control")
			t.Logf("weakened twin: %v", err)
		})
	}
}

// TestAgentViewRefusesVisibleHiddenPaths: when a cover is missing, the
// shim's own check as the agent finds the path readable and refuses to
// start the agent; with the check also removed, the agent starts.
func TestAgentViewRefusesVisibleHiddenPaths(t *testing.T) {
	fx := newViewFixture(t)
	for _, tc := range []struct {
		name   string
		k      shimKnobs
		refuse bool
	}{
		{"cover missing, check on", shimKnobs{TestOnlySkipHide: true}, true},
		{"weakened twin: cover and check missing", shimKnobs{TestOnlySkipHide: true, TestOnlySkipHideVerify: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, stderr := fx.runProbe(t, fx.args, tc.k, nil, "ifaces")
			if tc.refuse {
				assert.NotEqual(t, 0, code)
				assert.Contains(t, stderr, "is still visible to the agent")
			} else {
				assert.Equal(t, 0, code, stderr)
			}
		})
	}
}

// TestAgentViewFrozenCounters: while the agent holds its first reading,
// the test (outside the shim) burns CPU and starts 1,000 threads; the
// agent's second reading of every host-wide counter, and of sysinfo(2), is
// identical. Meanwhile the agent's processes are in its cgroups.
func TestAgentViewFrozenCounters(t *testing.T) {
	fx := newViewFixture(t)
	var inCgroups []string
	load := func() {
		inCgroups = inCgroups[:0]
		for _, cg := range fx.cgroups {
			b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			require.NoError(t, err)
			inCgroups = append(inCgroups, strings.TrimSpace(string(b)))
		}
		hostLoad(t, 1000, 300*time.Millisecond)
	}
	var present []string // the counter files this kernel has
	for _, p := range counterFiles {
		if _, err := os.Stat(p); err == nil {
			present = append(present, p)
		}
	}
	for _, tc := range []struct {
		name   string
		weaken func(a *ShimArgs, k *shimKnobs)
		frozen []string // counters that must not move
		moved  []string // counters that must move (the weakened twin)
	}{
		{"frozen", func(*ShimArgs, *shimKnobs) {}, append(append([]string(nil), present...), "sysinfo"), nil},
		{"weakened twin: live /proc", func(a *ShimArgs, k *shimKnobs) { k.TestOnlyLiveProc = true }, []string{"sysinfo"}, []string{"/proc/stat", "/proc/loadavg", "/proc/meminfo", "/proc/vmstat", "/proc/interrupts"}},
		{"weakened twin: live sysinfo", func(a *ShimArgs, k *shimKnobs) { k.TestOnlyLiveSysinfo = true }, present, []string{"sysinfo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := fx.args
			var k shimKnobs
			tc.weaken(&a, &k)
			r, code, stderr := fx.runProbe(t, a, k, load, "counters")
			require.Equal(t, 0, code, "shim: %s", stderr)
			for _, c := range tc.frozen {
				assert.NotContains(t, r.Counters[0][c], "error:", c)
				assert.Equal(t, r.Counters[0][c], r.Counters[1][c], "%s moved", c)
			}
			for _, c := range tc.moved {
				assert.NotEqual(t, r.Counters[0][c], r.Counters[1][c], "%s did not move: the twin proves nothing", c)
			}
			for i, procs := range inCgroups {
				assert.NotEmpty(t, procs, "no agent process in %s", fx.cgroups[i])
			}
		})
	}
	t.Run("weakened twin: no cgroups", func(t *testing.T) {
		a := fx.args
		a.Cgroups = nil
		_, code, stderr := fx.runProbe(t, a, shimKnobs{}, load, "counters")
		require.Equal(t, 0, code, "shim: %s", stderr)
		for i, procs := range inCgroups {
			assert.Empty(t, procs, "%s holds processes although the shim joined nothing", fx.cgroups[i])
		}
	})
}

// hostLoad starts n threads and keeps them and every CPU busy for d.
func hostLoad(t *testing.T, n int, d time.Duration) {
	t.Helper()
	stop := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			runtime.LockOSThread() // one OS thread each: the host's fork counter moves by n
			started.Done()
			<-stop
		}()
	}
	started.Wait()
	for i := 0; i < runtime.NumCPU(); i++ {
		go func() {
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
					x++
				}
			}
		}()
	}
	time.Sleep(d)
	close(stop)
	done.Wait()
}

// TestAgentViewTools: the tools an agent uses still work in the view, and
// see the frozen host: free, nproc, top, uptime, Python and Node.
func TestAgentViewTools(t *testing.T) {
	fx := newViewFixture(t)
	tools := []struct{ name, line string }{
		{"free", "free -b"},
		{"nproc", "nproc"},
		{"top", "top -bn1 | head -5"},
		{"uptime", "uptime"},
		{"python3", `/usr/bin/python3 -c 'import os; print(os.cpu_count(), os.getloadavg()[0] >= 0)'`},
	}
	node, nodeErr := exec.LookPath("node")
	if nodeErr == nil {
		tools = append(tools, struct{ name, line string }{"node", node + ` -e 'console.log(require("os").totalmem(), require("os").cpus().length)'`})
	}
	var acts []string
	for _, tl := range tools {
		acts = append(acts, "cmd="+tl.name+":"+tl.line)
	}
	r, code, stderr := fx.runProbe(t, fx.args, shimKnobs{}, nil, acts...)
	require.Equal(t, 0, code, "shim: %s", stderr)
	for _, tl := range tools {
		c := r.Cmd[tl.name]
		assert.Empty(t, c.Err, "%s: %s", tl.name, c.Out)
		t.Logf("%s:\n%s", tl.name, c.Out)
	}
	ncpu := strconv.Itoa(runtime.NumCPU())
	assert.Equal(t, ncpu, strings.TrimSpace(r.Cmd["nproc"].Out))
	assert.Equal(t, ncpu+" True", strings.TrimSpace(r.Cmd["python3"].Out))
	assert.Contains(t, r.Cmd["free"].Out, "Mem:")
	assert.Contains(t, r.Cmd["uptime"].Out, "load average")
	assert.Contains(t, r.Cmd["top"].Out, "load average")
	if nodeErr == nil {
		f := strings.Fields(r.Cmd["node"].Out)
		require.Len(t, f, 2)
		assert.NotEqual(t, "0", f[0])
		assert.Equal(t, ncpu, f[1])
	}
}

// TestSysinfoFilter runs the agent's filter in the policy package's BPF
// interpreter: native sysinfo goes to the shim, the x32 entry point fails,
// everything else passes untouched.
func TestSysinfoFilter(t *testing.T) {
	arch, err := policy.NativeArch()
	require.NoError(t, err)
	abi, err := sysinfoABIFor(runtime.GOARCH)
	require.NoError(t, err)
	prog := sysinfoFilter(abi)
	c := abi.sys
	args := func(a0, a1, a2 uint64) [6]uint64 { return [6]uint64{a0, a1, a2} }
	for _, tc := range []struct {
		name string
		nr   uint32
		args [6]uint64
		want string
	}{
		{"sysinfo goes to the shim", abi.nr, args(0, 0, 0), "user_notif"},
		{"x32 calls are refused", 0x40000000 | abi.nr, args(0, 0, 0), "errno ENOSYS"},
		{"x32 read is refused", 0x40000000, args(0, 0, 0), "errno ENOSYS"},
		{"read", 0, args(0, 0, 0), "allow"},
		{"the call after sysinfo", abi.nr + 1, args(0, 0, 0), "allow"},
		{"the call before sysinfo", abi.nr - 1, args(0, 0, 0), "allow"},
		{"pidfd_open", c.pidfdOpen, args(1, 0, 0), "errno ENOSYS"},
		{"clone3", c.clone3, args(0, 88, 0), "errno ENOSYS"},
		{"clone for a thread", c.clone, args(0x3d0f00, 0, 0), "allow"},
		{"fork through clone", c.clone, args(0x1200011, 0, 0), "allow"},
		{"clone with CLONE_PIDFD", c.clone, args(0x1200011|clonePidfd, 0, 0), "errno EINVAL"},
		{"getsockopt SO_PEERPIDFD", c.getsockopt, args(3, unix.SOL_SOCKET, soPeerPidfd), "errno ENOPROTOOPT"},
		{"setsockopt SO_PASSPIDFD", c.setsockopt, args(3, unix.SOL_SOCKET, soPassPidfd), "errno ENOPROTOOPT"},
		{"getsockopt SO_PEERCRED", c.getsockopt, args(3, unix.SOL_SOCKET, unix.SO_PEERCRED), "allow"},
		{"setsockopt of another level, same number", c.setsockopt, args(3, unix.IPPROTO_TCP, soPassPidfd), "allow"},
	} {
		got, err := policy.Evaluate(prog, arch, tc.nr, tc.args)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// BenchmarkShimStart measures one agent start, /bin/true as the agent,
// through RunAgent: with the whole view, with /proc left as mounted
// (no snapshot and no cover), and bare (the same binary in new mount and
// pid namespaces, no shim).
func BenchmarkShimStart(b *testing.B) {
	fx := newViewFixture(b)
	exe, err := os.Executable()
	require.NoError(b, err)
	for _, bc := range []struct {
		name    string
		k       shimKnobs
		network string
	}{
		{"view", shimKnobs{}, NetworkNone},
		{"view, host network", shimKnobs{}, NetworkHost},
		{"view without /proc work", shimKnobs{TestOnlyLiveProc: true, TestOnlyKeepProc: true}, NetworkNone},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := fx.args
			a.Network = bc.network
			kb, err := json.Marshal(bc.k)
			require.NoError(b, err)
			env := []string{"PATH=/usr/bin:/bin", agentViewKnobsEnv + "=" + string(kb)}
			for b.Loop() {
				code, err := RunAgent(b.Context(), exe, a, env, []string{"/bin/true"}, nil, io.Discard, io.Discard)
				if err != nil || code != 0 {
					b.Fatalf("shim: %d %v", code, err)
				}
			}
		})
	}
	b.Run("bare namespaces", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAgentSysinfo measures one sysinfo(2) call by the agent, answered
// by the shim from its frozen copy, against the kernel's own answer.
func BenchmarkAgentSysinfo(b *testing.B) {
	fx := newViewFixture(b)
	for _, bc := range []struct {
		name string
		k    shimKnobs
	}{{"frozen by the shim", shimKnobs{}}, {"live", shimKnobs{TestOnlyLiveSysinfo: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 20000
			r, code, stderr := fx.runProbe(b, fx.args, bc.k, nil, "sysinfo-loop="+strconv.Itoa(n))
			require.Equal(b, 0, code, stderr)
			ns, err := strconv.ParseInt(r.Cmd["sysinfo-loop"].Out, 10, 64)
			require.NoError(b, err)
			b.ReportMetric(float64(ns)/n, "ns/sysinfo")
		})
	}
}

// TestAgentGetsNoPidfd: since Linux 6.9 a pidfd's inode number counts
// every task the host creates, so a sandbox's threads would show in it.
func TestAgentGetsNoPidfd(t *testing.T) {
	fx := newViewFixture(t)
	r, code, stderr := fx.runProbe(t, fx.args, shimKnobs{}, nil, "pidfd")
	require.Equal(t, 0, code, stderr)
	for _, k := range []string{"pidfd_open", "clone3", "SO_PEERPIDFD"} {
		assert.NotEmpty(t, r.Connect[k], "the agent got a pidfd through %s", k)
	}
	assert.Equal(t, unix.ENOSYS.Error(), r.Connect["pidfd_open"])
	assert.Equal(t, unix.ENOPROTOOPT.Error(), r.Connect["SO_PEERPIDFD"])

	// Weakened twin: the same probe outside the shim's filter gets pidfds.
	twin := fx.runTwin(t, "pidfd")
	assert.Empty(t, twin.Connect["pidfd_open"], "weakened twin: without the filter pidfd_open works")
	assert.Empty(t, twin.Connect["SO_PEERPIDFD"], "weakened twin: without the filter SO_PEERPIDFD works")
}

// TestAgentIPCNamespace: a System V segment the host holds, open to
// everyone, is out of the agent's reach. The weakened twin runs the same
// probe as the same user outside RunAgent's IPC namespace, and finds it.
func TestAgentIPCNamespace(t *testing.T) {
	fx := newViewFixture(t)
	key := 0x41574600 + os.Getpid()%256
	id, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	act := "shmget=" + strconv.Itoa(key)
	r, code, stderr := fx.runProbe(t, fx.args, shimKnobs{}, nil, act)
	require.Equal(t, 0, code, stderr)
	assert.NotEmpty(t, r.Connect["shm:"+strconv.Itoa(key)], "the agent found the host's segment")

	twin := fx.runTwin(t, act)
	assert.Empty(t, twin.Connect["shm:"+strconv.Itoa(key)], "weakened twin: outside the namespace the segment is found")
}
