package docker

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// createBody is the Engine's container-create request, limited to the
// fields the backend sets.
type createBody struct {
	Image           string            `json:"Image"`
	Cmd             []string          `json:"Cmd"`
	Entrypoint      []string          `json:"Entrypoint"`
	Env             []string          `json:"Env"`
	WorkingDir      string            `json:"WorkingDir"`
	User            string            `json:"User"`
	Hostname        string            `json:"Hostname"`
	Labels          map[string]string `json:"Labels"`
	NetworkDisabled bool              `json:"NetworkDisabled"`
	AttachStdin     bool              `json:"AttachStdin"`
	AttachStdout    bool              `json:"AttachStdout"`
	AttachStderr    bool              `json:"AttachStderr"`
	OpenStdin       bool              `json:"OpenStdin"`
	Tty             bool              `json:"Tty"`
	HostConfig      hostConfig        `json:"HostConfig"`
}

type hostConfig struct {
	NetworkMode    string    `json:"NetworkMode"`
	ReadonlyRootfs bool      `json:"ReadonlyRootfs"`
	CapDrop        []string  `json:"CapDrop,omitempty"`
	SecurityOpt    []string  `json:"SecurityOpt"`
	Memory         int64     `json:"Memory"`
	MemorySwap     int64     `json:"MemorySwap"`
	NanoCPUs       int64     `json:"NanoCpus"`
	CpusetCpus     string    `json:"CpusetCpus,omitempty"`
	PidsLimit      *int64    `json:"PidsLimit,omitempty"`
	Ulimits        []ulimit  `json:"Ulimits"`
	ShmSize        int64     `json:"ShmSize"`
	IpcMode        string    `json:"IpcMode"`
	CgroupnsMode   string    `json:"CgroupnsMode"`
	MaskedPaths    []string  `json:"MaskedPaths"`
	ReadonlyPaths  []string  `json:"ReadonlyPaths"`
	Mounts         []mount   `json:"Mounts"`
	LogConfig      logConfig `json:"LogConfig"`
	Privileged     bool      `json:"Privileged"`
	Init           bool      `json:"Init"`
	AutoRemove     bool      `json:"AutoRemove"`
	OomKillDisable bool      `json:"OomKillDisable"`
}

type ulimit struct {
	Name string `json:"Name"`
	Soft int64  `json:"Soft"`
	Hard int64  `json:"Hard"`
}

type mount struct {
	Type        string       `json:"Type"`
	Source      string       `json:"Source"`
	Target      string       `json:"Target"`
	ReadOnly    bool         `json:"ReadOnly"`
	BindOptions *bindOptions `json:"BindOptions,omitempty"`
}

type bindOptions struct {
	Propagation string `json:"Propagation"`
}

type logConfig struct {
	Type string `json:"Type"`
}

// containerSpec is everything buildCreate needs.
type containerSpec struct {
	desc    *specs.Spec // isolate.Describe of the template and the job
	image   string
	seccomp string // the full "seccomp=..." security option
	ws      *workspace.Workspace
	tmp     string // host tmpfs bound at /tmp
	labels  map[string]string

	// root is the sandbox's own mount of the rootfs ("" = none), and
	// rootDirs its top-level directories to bind over the image's.
	root     string
	rootDirs []string
}

// EnclaveMissingControl is why the docker backend cannot run a bounded
// agent's enclave: the one text its refusal and the runtime matrix print.
const EnclaveMissingControl = "the Engine cannot join an existing network namespace (NetworkMode has no namespace-path form), so the enclave network cannot be expressed"

// buildCreate renders the description of one job as the Engine's create
// request: the controls of `docker run --network none --read-only --user
// 65534:65534 --cap-drop ALL --security-opt no-new-privileges:true
// --security-opt seccomp=<policy> --memory M --memory-swap M --cpus C
// --pids-limit P --ulimit fsize,nofile,core --shm-size S --hostname H
// --workdir /query`, the masked and read-only paths, and the binds of the
// workspace (/query, /query/repo, /awf) and of a host tmpfs at /tmp, plus a
// size-capped json-file log that the backend reads back as the bounded
// capture.
//
// A bind cannot carry noexec, nosuid or nodev through the API: each bind
// inherits them from its host mount, which the workspace makes with the
// description's flags, and checkBindFlags proves that before create.
func buildCreate(c containerSpec) (createBody, error) {
	d := c.desc
	if d == nil || d.Process == nil || d.Linux == nil || d.Linux.Resources == nil {
		return createBody{}, fmt.Errorf("docker: incomplete description")
	}
	network := "host"
	if slices.ContainsFunc(d.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace }) {
		network = "none"
	}
	if slices.ContainsFunc(d.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace && n.Path != "" }) {
		// An enclave network (isolate.Template.Network): the Engine's
		// NetworkMode is none, host, bridge, a named network or
		// container:<id>, never a namespace path, so the container cannot
		// join the enclave's namespace; failing here beats "none", which
		// would drop the one peer without saying so.
		return createBody{}, fmt.Errorf("docker: BLOCKED: %s", EnclaveMissingControl)
	}
	var capDrop []string
	if d.Process.Capabilities != nil {
		capDrop = []string{"ALL"}
	}
	bind := func(src, dst string, ro bool) mount {
		return mount{Type: "bind", Source: src, Target: dst, ReadOnly: ro, BindOptions: &bindOptions{Propagation: "rprivate"}}
	}
	// The files of the root come from the sandbox's own mount, never from
	// the image layer that every container shares (see rootmount.go).
	mounts := rootBinds(c.root, c.rootDirs)
	var shm int64
	for _, m := range d.Mounts {
		f := isolate.FlagsOf(m)
		switch {
		case m.Destination == isolate.DevDir:
			// The Engine's own /dev (see isolate.Deviations).
		case m.Destination == isolate.DevShmDir:
			// The Engine's private /dev/shm is noexec, nosuid, nodev.
			shm = f.Size
		case m.Destination == isolate.TmpDir:
			// A host tmpfs: the Engine's own tmpfs would copy the image's
			// /tmp mode (0755) onto it.
			mounts = append(mounts, bind(c.tmp, m.Destination, f.ReadOnly))
		case m.Destination == isolate.QueryDir:
			mounts = append(mounts, bind(c.ws.QueryDir(), m.Destination, f.ReadOnly))
		case m.Source == isolate.SourceRepo:
			// The workspace's overlay over the runtime's view of the seed
			// (upper on its own tmpfs of RepoUpperBytes), mounted on the
			// host before create. The Engine runs in the broker's mount
			// namespace (or one that receives its mounts), so runc binds
			// the overlay itself, not the empty directory under it; an
			// Engine that saw none of the workspace's mounts would not find
			// the directory at all (it is inside the repo tmpfs) and fail
			// the create. The bind inherits the overlay's nosuid, nodev and
			// noexec (checkBindFlags), and rprivate keeps the container's
			// mounts of it out of the host's table, so none outlives the
			// container.
			mounts = append(mounts, bind(c.ws.RepoDir(), m.Destination, f.ReadOnly))
		case m.Source == isolate.SourceScript:
			// The workspace seals the script directory read-only, noexec,
			// nosuid and nodev, and the bind inherits all four. Asking the
			// Engine for ReadOnly would make runc remount the bind with
			// MS_RDONLY alone, which clears the other three (measured).
			mounts = append(mounts, bind(c.ws.AwfDir(), m.Destination, false))
		default:
			return createBody{}, fmt.Errorf("docker: mount %s has no rendering", m.Destination)
		}
	}
	var ulimits []ulimit
	for _, rl := range d.Process.Rlimits {
		name, ok := ulimitNames[rl.Type]
		if !ok {
			return createBody{}, fmt.Errorf("docker: rlimit %s has no ulimit", rl.Type)
		}
		ulimits = append(ulimits, ulimit{Name: name, Soft: int64(rl.Soft), Hard: int64(rl.Hard)})
	}
	lr := d.Linux.Resources
	var pids *int64
	if lr.Pids != nil && lr.Pids.Limit != nil {
		p := *lr.Pids.Limit
		pids = &p
	}
	return createBody{
		Image:           c.image,
		Cmd:             slices.Clone(d.Process.Args),
		Entrypoint:      []string{},
		Env:             slices.Clone(d.Process.Env),
		WorkingDir:      d.Process.Cwd,
		User:            fmt.Sprintf("%d:%d", d.Process.User.UID, d.Process.User.GID),
		Hostname:        d.Hostname,
		Labels:          c.labels,
		NetworkDisabled: network == "none",
		HostConfig: hostConfig{
			NetworkMode:    network,
			ReadonlyRootfs: d.Root.Readonly,
			// The Engine's default on cgroup v1 hosts is the host's cgroup
			// namespace, which shows the sandbox the host's cgroup tree.
			CgroupnsMode: "private",
			CapDrop:      capDrop,
			SecurityOpt:  []string{"no-new-privileges:true", c.seccomp},
			Memory:       *lr.Memory.Limit,
			MemorySwap:   *lr.Memory.Swap,
			NanoCPUs:     *lr.CPU.Quota * 1_000_000_000 / int64(*lr.CPU.Period),
			// Disjoint from the agent's CPUs (invariant 8).
			CpusetCpus: lr.CPU.Cpus,
			PidsLimit:  pids,
			Ulimits:    ulimits,
			ShmSize:    shm,
			IpcMode:    "private",
			Mounts:     mounts,
			// No log: the Engine would write the script's output to its
			// data root, whose free counts a later script reads (statvfs
			// of /) and the agent may read of its own disk, moved by an
			// amount and at times the script chose. Exec reads the
			// output from the attach stream instead, which keeps it in
			// memory (TestOutputStaysOffTheEnginesDisk).
			LogConfig: logConfig{Type: "none"},
			// This replaces the Engine's default list, which it contains;
			// create checks that the Engine kept it.
			MaskedPaths:   slices.Clone(d.Linux.MaskedPaths),
			ReadonlyPaths: slices.Clone(d.Linux.ReadonlyPaths),
		},
	}, nil
}

// ulimitNames are the Engine's names of the description's rlimits.
var ulimitNames = map[string]string{"RLIMIT_FSIZE": "fsize", "RLIMIT_NOFILE": "nofile", "RLIMIT_CORE": "core"}

// checkBindFlags fails closed unless the host mount of every bind the
// description makes has at least the description's flags: the Engine's
// API cannot set noexec, nosuid or nodev on a bind, which inherits them
// from its source.
func checkBindFlags(d *specs.Spec, body createBody) error {
	want := map[string]isolate.MountFlags{}
	for _, m := range d.Mounts {
		want[m.Destination] = isolate.FlagsOf(m)
	}
	for _, m := range body.HostConfig.Mounts {
		w, ok := want[m.Target]
		if !ok {
			continue // a read-only bind of the root
		}
		got, err := HostMountFlags(m.Source)
		if err != nil {
			return err
		}
		if m.ReadOnly {
			// runc remounts a read-only bind with MS_RDONLY alone, which
			// clears the flags the bind inherited (measured with runc 1.1).
			got = isolate.MountFlags{ReadOnly: true}
		}
		if (w.ReadOnly && !got.ReadOnly) || (w.NoExec && !got.NoExec) || (w.NoSuid && !got.NoSuid) || (w.NoDev && !got.NoDev) {
			return fmt.Errorf("docker: bind of %s at %s is %s, the description asks for %s", m.Source, m.Target, got, w)
		}
	}
	return nil
}

// HostMountFlags reads the flags and size of the host mount that holds path.
func HostMountFlags(path string) (isolate.MountFlags, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return isolate.MountFlags{}, fmt.Errorf("docker: statfs %s: %w", path, err)
	}
	f := isolate.MountFlags{
		ReadOnly: st.Flags&unix.ST_RDONLY != 0, NoExec: st.Flags&unix.ST_NOEXEC != 0,
		NoSuid: st.Flags&unix.ST_NOSUID != 0, NoDev: st.Flags&unix.ST_NODEV != 0,
	}
	if st.Type == unix.TMPFS_MAGIC {
		f.Size = int64(st.Blocks) * st.Bsize
	}
	return f, nil
}
