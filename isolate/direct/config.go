package direct

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups"
	devcfg "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/policy"
)

// oomScoreAdj makes a sandbox the OOM killer's first choice on the host.
const oomScoreAdj = 1000

// describe returns the description of the sandbox that t and argv make on
// this runtime's host: every value the sandbox gets comes from it.
func (r *Runtime) describe(t isolate.Template, argv []string) (*specs.Spec, error) {
	return isolate.Describe(t, isolate.Job{Argv: argv}, isolate.HostConfig{SandboxCPUs: r.cg.cpus})
}

// containerConfig renders the description d of one sandbox as its
// libcontainer configuration. root is the sandbox's own mount of the root
// image, lower the repo overlay's lower layer (the runtime's view of
// t.Repo), sc its scratch directories.
func (r *Runtime) containerConfig(id, root, lower string, t isolate.Template, d *specs.Spec, sc scratchDirs) (*configs.Config, error) {
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
	var ns configs.Namespaces
	var networks []*configs.Network
	for _, n := range d.Linux.Namespaces {
		typ, ok := namespaceTypes[n.Type]
		if !ok {
			return nil, fmt.Errorf("describe: namespace %q has no libcontainer type", n.Type)
		}
		// A path joins an existing namespace (an enclave's network).
		ns = append(ns, configs.Namespace{Type: typ, Path: n.Path})
		if typ == configs.NEWNET && n.Path == "" {
			networks = []*configs.Network{{Type: "loopback", Address: "127.0.0.1/0", Gateway: "localhost"}}
		}
	}
	var caps *configs.Capabilities
	if c := d.Process.Capabilities; c != nil {
		caps = &configs.Capabilities{Bounding: c.Bounding, Effective: c.Effective, Inheritable: c.Inheritable, Permitted: c.Permitted, Ambient: c.Ambient}
	}
	res, err := r.resources(d.Linux.Resources, d.Linux.Devices)
	if err != nil {
		return nil, err
	}
	rlimits, err := rlimitsOf(d.Process.Rlimits)
	if err != nil {
		return nil, err
	}
	// RLIMIT_NPROC counts per host uid and every sandbox is uid 65534, so it
	// stays as high as the broker's own hard limit; the pids cgroup is the
	// real limit.
	var nl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &nl); err != nil {
		return nil, fmt.Errorf("read RLIMIT_NPROC: %w", err)
	}
	rlimits = append(rlimits, configs.Rlimit{Type: unix.RLIMIT_NPROC, Hard: nl.Max, Soft: nl.Max})
	ms, err := mounts(d, t.Weaken, lower, sc)
	if err != nil {
		return nil, err
	}
	adj := oomScoreAdj
	cfg := &configs.Config{
		Rootfs:            root,
		Readonlyfs:        d.Root.Readonly,
		RootPropagation:   unix.MS_SLAVE | unix.MS_REC,
		Hostname:          d.Hostname,
		Namespaces:        ns,
		Networks:          networks,
		Capabilities:      caps,
		NoNewPrivileges:   d.Process.NoNewPrivileges,
		Seccomp:           seccomp,
		MaskPaths:         slices.Clone(d.Linux.MaskedPaths),
		ReadonlyPaths:     slices.Clone(d.Linux.ReadonlyPaths),
		ParentDeathSignal: int(unix.SIGKILL),
		OomScoreAdj:       &adj,
		Devices:           devicesOf(d.Linux.Devices),
		Mounts:            ms,
		Rlimits:           rlimits,
		Cgroups: &cgroups.Cgroup{
			Path:      r.cg.libcontainerPath(id),
			Resources: res,
		},
	}
	return cfg, nil
}

// process renders the description's job as libcontainer's init process.
func process(d *specs.Spec, stdout, stderr io.Writer) *libcontainer.Process {
	return &libcontainer.Process{
		Args:   slices.Clone(d.Process.Args),
		Env:    slices.Clone(d.Process.Env),
		UID:    int(d.Process.User.UID),
		GID:    int(d.Process.User.GID),
		Cwd:    d.Process.Cwd,
		Stdout: stdout,
		Stderr: stderr,
		Init:   true,
	}
}

// namespaceTypes maps the description's namespaces to libcontainer's.
var namespaceTypes = map[specs.LinuxNamespaceType]configs.NamespaceType{
	specs.MountNamespace: configs.NEWNS, specs.UTSNamespace: configs.NEWUTS, specs.IPCNamespace: configs.NEWIPC,
	specs.PIDNamespace: configs.NEWPID, specs.CgroupNamespace: configs.NEWCGROUP, specs.NetworkNamespace: configs.NEWNET,
}

// resources renders the description's cgroup limits. A limit the
// description does not set (the NoPidsLimit weakening) stays unset.
func (r *Runtime) resources(lr *specs.LinuxResources, devs []specs.LinuxDevice) (*cgroups.Resources, error) {
	if lr == nil || lr.Memory == nil || lr.Memory.Limit == nil || lr.CPU == nil || lr.CPU.Quota == nil || lr.CPU.Period == nil {
		return nil, fmt.Errorf("describe: memory and cpu limits missing")
	}
	res := &cgroups.Resources{
		Memory:     *lr.Memory.Limit,
		CpuQuota:   *lr.CPU.Quota,
		CpuPeriod:  *lr.CPU.Period,
		CpusetCpus: lr.CPU.Cpus, // libcontainer copies the memory nodes from the parent
		Devices:    deviceRules(lr.Devices, devs),
	}
	if lr.Pids != nil && lr.Pids.Limit != nil {
		p := *lr.Pids.Limit
		res.PidsLimit = &p
	}
	if lr.Memory.Swap != nil && (r.cg.v2() || r.cg.memsw) {
		res.MemorySwap = *lr.Memory.Swap
	}
	if r.cg.v2() {
		res.Unified = map[string]string{"memory.oom.group": "1"}
	}
	return res, nil
}

// rlimitTypes are the rlimits a description may set.
var rlimitTypes = map[string]int{"RLIMIT_FSIZE": unix.RLIMIT_FSIZE, "RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_NPROC": unix.RLIMIT_NPROC}

func rlimitsOf(rs []specs.POSIXRlimit) ([]configs.Rlimit, error) {
	var out []configs.Rlimit
	for _, rl := range rs {
		typ, ok := rlimitTypes[rl.Type]
		if !ok {
			return nil, fmt.Errorf("describe: unknown rlimit %s", rl.Type)
		}
		out = append(out, configs.Rlimit{Type: typ, Hard: rl.Hard, Soft: rl.Soft})
	}
	return out, nil
}

// mounts renders the description's filesystems on top of the read-only
// root. The repo view becomes an overlay whose lower layer is the view of
// t.Repo (never the seed itself) and whose upper layer is on the scratch
// tmpfs; the script directory is the scratch's awf directory.
//
// There is no /proc and no /sys (see isolate.Describe). Nothing a bounded
// query or libcontainer's init needs reads /proc inside the sandbox: init
// reopens its exec fifo through a private procfs handle of its own, closed
// before the job starts. Only the test-only HostView weakening mounts
// /proc, to prove the channel tests and probes can fail.
func mounts(d *specs.Spec, w isolate.Weakening, lower string, sc scratchDirs) ([]*configs.Mount, error) {
	ms := []*configs.Mount{}
	if w.HostView {
		ms = append(ms, &configs.Mount{Source: "proc", Destination: "/proc", Device: "proc", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC})
	}
	for _, m := range d.Mounts {
		flags, data, err := mountFlags(isolate.MountOptions(m))
		if err != nil {
			return nil, fmt.Errorf("describe: mount %s: %w", m.Destination, err)
		}
		cm := &configs.Mount{Source: m.Source, Destination: m.Destination, Device: m.Type, Flags: flags, Data: data}
		switch {
		case m.Source == isolate.SourceScript:
			cm.Source, cm.Device = sc.awf, "bind"
		case m.Source == isolate.SourceRepo:
			if lower == "" {
				return nil, fmt.Errorf("describe: %s without a repository view", m.Destination)
			}
			// An overlay, not a bind: its size is the upper tmpfs's.
			cm.Source, cm.Device = "overlay", "overlay"
			cm.Flags &^= unix.MS_BIND | unix.MS_REC
			cm.Data = fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", lower, sc.upper, sc.work, workspace.OverlayOptions)
		case m.Type == "bind":
			return nil, fmt.Errorf("describe: bind of %s has no source in this backend", m.Source)
		}
		ms = append(ms, cm)
	}
	return ms, nil
}

// mountOptionFlags are the mount(2) flags of the options a description uses.
var mountOptionFlags = map[string]int{
	"ro": unix.MS_RDONLY, "rw": 0, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noexec": unix.MS_NOEXEC,
	"strictatime": unix.MS_STRICTATIME, "bind": unix.MS_BIND, "rbind": unix.MS_BIND | unix.MS_REC,
}

// mountFlags splits options into mount(2) flags and filesystem data
// (key=value options such as mode and size).
func mountFlags(opts []string) (int, string, error) {
	var flags int
	var data []string
	for _, o := range opts {
		if f, ok := mountOptionFlags[o]; ok {
			flags |= f
			continue
		}
		if !strings.Contains(o, "=") {
			return 0, "", fmt.Errorf("unknown mount option %q", o)
		}
		data = append(data, o)
	}
	return flags, strings.Join(data, ","), nil
}

// devicesOf renders the description's device nodes for libcontainer.
func devicesOf(ds []specs.LinuxDevice) []*devcfg.Device {
	var out []*devcfg.Device
	for _, d := range ds {
		dev := &devcfg.Device{
			Rule:     devcfg.Rule{Type: devcfg.CharDevice, Major: d.Major, Minor: d.Minor, Permissions: devcfg.Permissions(isolate.DeviceAccess(d)), Allow: true},
			Path:     d.Path,
			FileMode: *d.FileMode,
		}
		if d.UID != nil {
			dev.Uid = *d.UID
		}
		if d.GID != nil {
			dev.Gid = *d.GID
		}
		out = append(out, dev)
	}
	return out
}

// deviceRules renders the description's cgroup device rules (deny every
// device) and allows only the nodes of devs, each with its own access.
func deviceRules(rules []specs.LinuxDeviceCgroup, devs []specs.LinuxDevice) []*devcfg.Rule {
	var out []*devcfg.Rule
	for _, r := range rules {
		out = append(out, &devcfg.Rule{Type: devcfg.WildcardDevice, Major: devcfg.Wildcard, Minor: devcfg.Wildcard, Permissions: devcfg.Permissions(r.Access), Allow: r.Allow})
	}
	for _, d := range devicesOf(devs) {
		rule := d.Rule
		out = append(out, &rule)
	}
	return out
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
