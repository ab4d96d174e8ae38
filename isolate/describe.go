package isolate

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate/hostview"
)

// The description of a sandbox is one OCI runtime spec, built by Describe
// from a Template and a Job. Every backend renders its sandbox from it
// (direct into libcontainer's configuration, gvisor into its bundle, docker
// into the Engine's create request), so that a fact such as the hostname or
// a mount's flags has one owner; a backend that cannot express a field
// declares it in Deviations, and the rendering tests of each backend allow
// nothing else.

// The sandbox identity. Every backend runs every job as these.
const (
	SandboxUID = 65534
	SandboxGID = 65534
	// Hostname is the one hostname of every sandbox: it names nothing about
	// the host, the run or the backend.
	Hostname = "sandbox"
)

// Mount sources that a backend replaces by its own: the description says
// what is mounted at a destination and with which flags, the backend says
// where its content comes from.
const (
	// SourceRepo is the private writable view of Template.Repo.
	SourceRepo = "awf:repo"
	// SourceScript is the read-only directory that holds the job's script.
	SourceScript = "awf:script"
)

// Paths of the other mounts of every sandbox.
const (
	ScriptDir = "/awf"
	TmpDir    = "/tmp"
	DevDir    = "/dev"
	DevShmDir = "/dev/shm"
)

// ScriptDirBytes is the size of the tmpfs that holds the job's script at
// ScriptDir, on every backend. The directory is a tmpfs of its own, not a
// directory of the host's disk: statvfs on it would show that filesystem's
// live free blocks and inodes, a host-wide counter. Two scripts of the
// largest size a backend takes (1 MiB, direct's bound) fit.
const ScriptDirBytes = 2 << 20

// maxDevShmBytes caps /dev/shm: POSIX shared memory needs little, and it is
// memory the tmpfs limits do not otherwise bound.
const maxDevShmBytes = 8 << 20

// DevShmBytes is the one /dev/shm size rule: 8 MiB, or the /tmp limit when
// that is smaller.
func DevShmBytes(l Limits) int64 { return min(maxDevShmBytes, l.TmpTmpfsBytes) }

// CPUPeriod is the CFS period of every sandbox's CPU quota, in microseconds.
const CPUPeriod = 100000

// AnnotationPolicy names the seccomp policy in a description: the
// description refers to the policy, and each backend compiles it into its
// own form (libcontainer's, OCI's inside the Sentry, the Engine's JSON).
const AnnotationPolicy = "awf.seccomp.policy"

// AnnotationNetworkPeer names the one peer of a sandbox that joins a
// network (Template.Network): the namespace path in the description's
// network namespace leads there and nowhere else.
const AnnotationNetworkPeer = "awf.network.peer"

// sandboxEnv is the whole environment of a job.
var sandboxEnv = []string{
	"PATH=/usr/bin",
	"LANG=C.UTF-8",
	"HOME=/tmp",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONUNBUFFERED=1",
}

// readonlyPaths stay visible but cannot be written wherever a /proc exists.
var readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// Describe returns the complete description of the sandbox that runs job
// from t on a host configured as h (only h.SandboxCPUs is read): identity,
// environment, argv and cwd, every mount with its flags, namespaces,
// rlimits, cgroup limits and CPUs, the seccomp policy's name, and the masked
// and read-only paths. Root.Path is t.RootFS; a backend replaces it by the
// root it serves from (direct: its read-only root tree; gvisor and docker:
// a mount of the root image of their own), and the sources SourceRepo and SourceScript
// by its own directories. The result is a fresh value the caller may change.
//
// There is no /proc and no /sys: procfs numbers its inodes from a host-wide
// counter that a script can read and move (invariant 8), and sysfs is
// host-wide throughout. The masks keep both hidden where a backend must
// mount /proc (see Deviations).
func Describe(t Template, job Job, h HostConfig) (*specs.Spec, error) {
	if t.Policy == nil && !t.Weaken.NoSeccomp {
		return nil, errors.New("describe: no seccomp policy: failing closed")
	}
	if err := t.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	l := t.Limits
	argv := job.Argv
	if len(argv) == 0 {
		argv = DefaultArgv()
	}
	var caps *specs.LinuxCapabilities
	if !t.Weaken.NilCapsConfig {
		// Empty, not nil: the bounding set is cleared too.
		caps = &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}}
	}
	tmpfs := func(dst string, size int64, mode string, extra ...string) specs.Mount {
		opts := append([]string{"nosuid", "nodev", "noexec"}, extra...)
		return specs.Mount{Destination: dst, Type: "tmpfs", Source: "tmpfs", Options: append(opts, "mode="+mode, fmt.Sprintf("size=%d", size))}
	}
	mounts := []specs.Mount{
		// Device nodes need dev; the directory is root's and 0755.
		{Destination: DevDir, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "strictatime", "mode=755", "size=65536"}},
		tmpfs(DevShmDir, DevShmBytes(l), "1777"),
		tmpfs(TmpDir, l.TmpTmpfsBytes, "1777"),
		tmpfs(QueryDir, l.QueryTmpfsBytes, "700", fmt.Sprintf("uid=%d", SandboxUID), fmt.Sprintf("gid=%d", SandboxGID)),
	}
	if t.Repo != "" {
		mounts = append(mounts, specs.Mount{Destination: RepoDir, Type: "bind", Source: SourceRepo,
			Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec", fmt.Sprintf("size=%d", l.RepoUpperBytes)}})
	}
	mounts = append(mounts, specs.Mount{Destination: ScriptDir, Type: "bind", Source: SourceScript,
		Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec", fmt.Sprintf("size=%d", ScriptDirBytes)}})

	ns := []specs.LinuxNamespace{
		{Type: specs.MountNamespace}, {Type: specs.UTSNamespace}, {Type: specs.IPCNamespace},
		{Type: specs.PIDNamespace}, {Type: specs.CgroupNamespace},
	}
	switch {
	case t.Network != nil && t.Weaken.NoNetNS:
		return nil, errors.New("describe: a network and the NoNetNS weakening exclude each other")
	case t.Network != nil:
		if !strings.HasPrefix(t.Network.NetNS, "/") || !t.Network.Peer.IsValid() {
			return nil, fmt.Errorf("describe: network %q with peer %v: want an absolute namespace path and a peer", t.Network.NetNS, t.Network.Peer)
		}
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: t.Network.NetNS})
	case !t.Weaken.NoNetNS:
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	mem, swap := l.MemoryBytes, l.MemoryBytes // memory+swap = memory: no swap
	quota, period := l.CPUMilli*CPUPeriod/1000, uint64(CPUPeriod)
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &swap},
		// The sandbox's CPUs, disjoint from the agent's (invariant 8).
		CPU: &specs.LinuxCPU{Quota: &quota, Period: &period, Cpus: h.SandboxCPUs},
		// Every device is denied but the nodes of Devices (see DeviceNodes).
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
	}
	if !t.Weaken.NoPidsLimit {
		pids := l.Pids
		res.Pids = &specs.LinuxPids{Limit: &pids}
	}
	ann := map[string]string{}
	if t.Policy != nil && !t.Weaken.NoSeccomp {
		ann[AnnotationPolicy] = t.Policy.Name
	}
	if t.Network != nil {
		ann[AnnotationNetworkPeer] = t.Network.Peer.String()
	}
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User:            specs.User{UID: SandboxUID, GID: SandboxGID},
			Args:            slices.Clone(argv),
			Env:             slices.Clone(sandboxEnv),
			Cwd:             QueryDir,
			Capabilities:    caps,
			NoNewPrivileges: true,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_FSIZE", Hard: uint64(l.FileSizeBytes), Soft: uint64(l.FileSizeBytes)},
				{Type: "RLIMIT_NOFILE", Hard: l.NoFile, Soft: l.NoFile},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Root:        &specs.Root{Path: t.RootFS, Readonly: true},
		Hostname:    Hostname,
		Mounts:      mounts,
		Annotations: ann,
		Linux: &specs.Linux{
			Namespaces:    ns,
			Resources:     res,
			Devices:       DeviceNodes(),
			MaskedPaths:   maskedPaths(t.Weaken),
			ReadonlyPaths: slices.Clone(readonlyPaths),
		},
	}, nil
}

// DeviceNodes are the device nodes of every sandbox's /dev: null, zero,
// full, random, urandom and tty, each 0666 but /dev/zero.
//
// /dev/zero is read-only (0444, cgroup rule "rm"). A shared mapping of a
// writable /dev/zero descriptor is a file on the kernel's internal shm
// mount, which numbers its files from one host-wide counter that
// memfd_create and fstat read anywhere on the host: one such mapping per
// bit carried a 64-bit secret from sandboxes to the host in full
// (TestShmInodeCounterChannel). The kernel makes a shared mapping of a
// read-only descriptor private, so reading zeros and mapping them work.
func DeviceNodes() []specs.LinuxDevice {
	mode := func(m uint32) *os.FileMode { v := os.FileMode(m); return &v }
	zero := uint32(0)
	dev := func(path string, major, minor int64, m uint32) specs.LinuxDevice {
		return specs.LinuxDevice{Path: path, Type: "c", Major: major, Minor: minor, FileMode: mode(m), UID: &zero, GID: &zero}
	}
	return []specs.LinuxDevice{
		dev("/dev/null", 1, 3, 0o666),
		dev("/dev/zero", 1, 5, 0o444),
		dev("/dev/full", 1, 7, 0o666),
		dev("/dev/random", 1, 8, 0o666),
		dev("/dev/urandom", 1, 9, 0o666),
		dev("/dev/tty", 5, 0, 0o666),
	}
}

// DeviceAccess is the cgroup access of a device node: read-only nodes
// cannot be opened for writing even by a process that could chmod them.
func DeviceAccess(d specs.LinuxDevice) string {
	if d.FileMode != nil && *d.FileMode&0o222 == 0 {
		return "rm"
	}
	return "rwm"
}

// maskedPaths is hostview's one list of host-wide counters and kernel
// information. The HostView weakening shows the counters, so that probes
// and channel tests prove they would see them, and keeps the kernel
// information masked.
func maskedPaths(w Weakening) []string {
	ps := hostview.SandboxMaskPaths()
	if w.HostView {
		return slices.DeleteFunc(ps, func(p string) bool { _, counter := hostview.Lookup(p); return counter })
	}
	return ps
}

// MountFlags are the controls of one mount that every backend must render
// the same way.
type MountFlags struct {
	ReadOnly, NoExec, NoSuid, NoDev bool
	// Size is the mount's size in bytes, 0 when not bounded by the mount.
	Size int64
}

// String renders the flags as mount options, for messages and docs.
func (f MountFlags) String() string {
	var o []string
	add := func(on bool, s string) {
		if on {
			o = append(o, s)
		}
	}
	add(f.ReadOnly, "ro")
	add(f.NoExec, "noexec")
	add(f.NoSuid, "nosuid")
	add(f.NoDev, "nodev")
	if f.Size > 0 {
		o = append(o, "size="+strconv.FormatInt(f.Size, 10))
	}
	return strings.Join(o, ",")
}

// FlagsOf reads the controls of a mount from its OCI options.
func FlagsOf(m specs.Mount) MountFlags {
	var f MountFlags
	for _, o := range m.Options {
		switch {
		case o == "ro":
			f.ReadOnly = true
		case o == "noexec":
			f.NoExec = true
		case o == "nosuid":
			f.NoSuid = true
		case o == "nodev":
			f.NoDev = true
		case strings.HasPrefix(o, "size="):
			f.Size, _ = strconv.ParseInt(strings.TrimPrefix(o, "size="), 10, 64)
		}
	}
	return f
}

// MountOptions returns m's options without those that are not mount(2)
// data or flags of a tmpfs or bind (the size of a bind is that of the
// backend's source, not an option).
func MountOptions(m specs.Mount) []string {
	if m.Type == "tmpfs" {
		return slices.Clone(m.Options)
	}
	return slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return strings.HasPrefix(o, "size=") })
}

// EngineEtcFiles are the files a container engine (docker) binds into
// /etc from its own data root. They are not in the description, so a
// check of every path a script can stat adds them (StatPaths).
func EngineEtcFiles() []string {
	return []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}
}

// StatPaths returns the paths whose filesystems a script in a sandbox
// described by d can stat: the root, /usr and /etc of the root filesystem,
// every mount of d (none when d is nil), and EngineEtcFiles. verify's fs/host-disk compares
// them with the host's disks; the conformance suite watches their free
// counts while the host writes (isolatetest.HostDiskUnseen).
func StatPaths(d *specs.Spec) []string {
	paths := []string{"/", "/usr", "/etc"}
	if d != nil {
		for _, m := range d.Mounts {
			paths = append(paths, m.Destination)
		}
	}
	return append(paths, EngineEtcFiles()...)
}
