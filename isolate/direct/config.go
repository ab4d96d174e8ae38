package direct

import (
	"fmt"
	"slices"

	"github.com/opencontainers/cgroups"
	devcfg "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/hostview"
	"github.com/awf-project/awf/policy"
)

// Sandbox identity and environment.
const (
	sandboxUID  = 65534
	sandboxGID  = 65534
	hostname    = "sandbox"
	devShmBytes = 8 << 20
	cpuPeriod   = 100000
	oomScoreAdj = 1000
)

// sandboxEnv is the whole environment of the job.
var sandboxEnv = []string{"PATH=/usr/bin", "LANG=C.UTF-8", "HOME=/tmp", "PYTHONDONTWRITEBYTECODE=1"}

// maskedPaths is every path libcontainer masks: hostview's, the one list of
// host-wide counters and kernel information. The sandbox mounts neither
// /proc nor /sys (see mounts), so today the masks find nothing to cover;
// they keep both hidden should either ever be mounted.
func maskedPaths(w isolate.Weakening) []string {
	ps := hostview.SandboxMaskPaths()
	if w.HostView {
		// Show the host-wide counters, so that probes and channel tests
		// prove they would see them; keep the kernel information masked.
		return slices.DeleteFunc(ps, func(p string) bool { _, counter := hostview.Lookup(p); return counter })
	}
	return ps
}

// readonlyPaths stay visible but cannot be written (/proc is mounted only
// under the HostView weakening).
var readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"}

// overlayOptions keep the per-invocation layer simple and safe with an
// untrusted upper: no redirects, no metacopy, no index, no xino.
const overlayOptions = "redirect_dir=off,metacopy=off,index=off,xino=off"

// containerConfig builds the libcontainer configuration of one sandbox.
// lower is the repo overlay's lower layer, the runtime's view of t.Repo.
func (r *Runtime) containerConfig(id, root, lower string, t isolate.Template, sc scratchDirs) (*configs.Config, error) {
	l := t.Limits
	var seccomp *configs.Seccomp
	if !t.Weaken.NoSeccomp {
		if t.Policy == nil {
			return nil, fmt.Errorf("no seccomp policy: refusing to run without one")
		}
		var err error
		seccomp, err = r.compiledPolicy(t.Policy)
		if err != nil {
			return nil, err
		}
	}
	ns := configs.Namespaces{
		{Type: configs.NEWNS}, {Type: configs.NEWUTS}, {Type: configs.NEWIPC},
		{Type: configs.NEWPID}, {Type: configs.NEWCGROUP},
	}
	var networks []*configs.Network
	if !t.Weaken.NoNetNS {
		ns = append(ns, configs.Namespace{Type: configs.NEWNET})
		networks = []*configs.Network{{Type: "loopback", Address: "127.0.0.1/0", Gateway: "localhost"}}
	}
	caps := &configs.Capabilities{} // empty, not nil: clears the bounding set too
	if t.Weaken.NilCapsConfig {
		caps = nil
	}
	var pids *int64
	if !t.Weaken.NoPidsLimit {
		p := l.Pids
		pids = &p
	}
	res := &cgroups.Resources{
		Memory:    l.MemoryBytes,
		PidsLimit: pids,
		CpuQuota:  l.CPUMilli * cpuPeriod / 1000,
		CpuPeriod: cpuPeriod,
		Devices:   deviceRules(),
		// The sandbox's CPUs, disjoint from the agent's (invariant 8);
		// libcontainer copies the memory nodes from the parent.
		CpusetCpus: r.cg.cpus,
	}
	if r.cg.v2() || r.cg.memsw {
		res.MemorySwap = l.MemoryBytes // memory+swap = memory: no swap
	}
	if r.cg.v2() {
		res.Unified = map[string]string{"memory.oom.group": "1"}
	}
	adj := oomScoreAdj
	// RLIMIT_NPROC counts per host uid and every sandbox is uid 65534, so it
	// stays as high as the broker's own hard limit; the pids cgroup is the
	// real limit.
	var nl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &nl); err != nil {
		return nil, fmt.Errorf("read RLIMIT_NPROC: %w", err)
	}
	nproc := nl.Max
	cfg := &configs.Config{
		Rootfs:            root,
		Readonlyfs:        true,
		RootPropagation:   unix.MS_SLAVE | unix.MS_REC,
		Hostname:          hostname,
		Namespaces:        ns,
		Networks:          networks,
		Capabilities:      caps,
		NoNewPrivileges:   true,
		Seccomp:           seccomp,
		MaskPaths:         maskedPaths(t.Weaken),
		ReadonlyPaths:     readonlyPaths,
		ParentDeathSignal: int(unix.SIGKILL),
		OomScoreAdj:       &adj,
		Devices:           allowedDevices(),
		Mounts:            mounts(t, lower, sc),
		Rlimits: []configs.Rlimit{
			{Type: unix.RLIMIT_FSIZE, Hard: uint64(l.FileSizeBytes), Soft: uint64(l.FileSizeBytes)},
			{Type: unix.RLIMIT_NOFILE, Hard: l.NoFile, Soft: l.NoFile},
			{Type: unix.RLIMIT_CORE, Hard: 0, Soft: 0},
			{Type: unix.RLIMIT_NPROC, Hard: nproc, Soft: nproc},
		},
		Cgroups: &cgroups.Cgroup{
			Path:      r.cg.libcontainerPath(id),
			Resources: res,
		},
	}
	return cfg, nil
}

// mounts lists the sandbox's filesystems on top of the read-only root. The
// repo overlay's lower layer is the view of t.Repo, never the seed itself.
//
// There is no /proc and no /sys. procfs numbers every inode of a process
// (/proc/<pid>, its files, /proc/self/fd/<n>, /proc/sys) from the host-wide
// counter get_next_ino, which no namespace or mask separates: with /proc a
// script could read it with one stat and move it with many lookups, one
// query signalling to the next (invariant 8; TestProcInodeCounterChannel).
// Nothing a bounded query or libcontainer's init needs reads /proc inside
// the sandbox: init reopens its exec fifo through a private procfs handle
// of its own, closed before the job starts. Only the test-only HostView
// weakening mounts /proc, to prove the channel tests and probes can fail.
func mounts(t isolate.Template, lower string, sc scratchDirs) []*configs.Mount {
	l := t.Limits
	const common = unix.MS_NOSUID | unix.MS_NODEV
	ms := []*configs.Mount{}
	if t.Weaken.HostView {
		ms = append(ms, &configs.Mount{Source: "proc", Destination: "/proc", Device: "proc", Flags: common | unix.MS_NOEXEC})
	}
	ms = append(ms, []*configs.Mount{
		{Source: "tmpfs", Destination: "/dev", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_STRICTATIME, Data: "mode=755,size=65536"},
		{Source: "shm", Destination: "/dev/shm", Device: "tmpfs", Flags: common | unix.MS_NOEXEC, Data: fmt.Sprintf("mode=1777,size=%d", devShmBytes)},
		{Source: "tmpfs", Destination: "/tmp", Device: "tmpfs", Flags: common | unix.MS_NOEXEC, Data: fmt.Sprintf("mode=1777,size=%d", l.TmpTmpfsBytes)},
		{Source: "tmpfs", Destination: isolate.QueryDir, Device: "tmpfs", Flags: common | unix.MS_NOEXEC,
			Data: fmt.Sprintf("mode=0755,uid=%d,gid=%d,size=%d", sandboxUID, sandboxGID, l.QueryTmpfsBytes)},
		{Source: sc.awf, Destination: "/awf", Device: "bind", Flags: unix.MS_BIND | unix.MS_RDONLY | common | unix.MS_NOEXEC},
	}...)
	if lower != "" {
		ms = append(ms, &configs.Mount{
			Source: "overlay", Destination: isolate.RepoDir, Device: "overlay", Flags: common,
			Data: fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", lower, sc.upper, sc.work, overlayOptions),
		})
	}
	return ms
}

// allowedDevices are the device nodes created in /dev: null, zero, full,
// random, urandom and tty. Each is a copy: specconv's list is shared.
//
// /dev/zero is read-only (mode 0444, cgroup rule "rm"). A shared mapping of
// a writable /dev/zero descriptor is a file on the kernel's internal shm
// mount, which numbers its files from one host-wide counter that memfd_create
// and fstat read anywhere on the host: one such mapping per bit carried a
// 64-bit secret from sandboxes to the host in full
// (TestShmInodeCounterChannel). The kernel makes a shared mapping of a
// read-only descriptor private, so reading zeros and mapping them still work.
func allowedDevices() []*devcfg.Device {
	var out []*devcfg.Device
	for _, d := range specconv.AllowedDevices {
		if d.Path == "" {
			continue
		}
		c := *d
		if c.Path == "/dev/zero" {
			c.FileMode = 0o444
			c.Rule.Permissions = "rm"
		}
		out = append(out, &c)
	}
	return out
}

// deviceRules deny every device and allow only the nodes in allowedDevices.
func deviceRules() []*devcfg.Rule {
	rules := []*devcfg.Rule{{Type: devcfg.WildcardDevice, Major: devcfg.Wildcard, Minor: devcfg.Wildcard, Permissions: "rwm", Allow: false}}
	for _, d := range allowedDevices() {
		rule := d.Rule
		rules = append(rules, &rule)
	}
	return rules
}

// maxCachedPolicies bounds the compiled-policy cache.
const maxCachedPolicies = 16

// compiledPolicy compiles p once per runtime (about 4 ms each time
// otherwise). libcontainer only reads the result, so sandboxes share it.
func (r *Runtime) compiledPolicy(p *policy.Policy) (*configs.Seccomp, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sc, ok := r.policies[p]; ok {
		return sc, nil
	}
	sc, err := p.Libcontainer()
	if err != nil {
		return nil, fmt.Errorf("compile seccomp policy: %w", err)
	}
	if sc == nil {
		return nil, fmt.Errorf("seccomp policy %q compiled to nothing", p.Name)
	}
	if len(r.policies) >= maxCachedPolicies {
		clear(r.policies)
	}
	r.policies[p] = sc
	return sc, nil
}
