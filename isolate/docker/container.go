package docker

import (
	"fmt"
	"strconv"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/hostview"
	"github.com/awf-project/awf/isolate/workspace"
)

// sandboxEnv is the whole environment of a job.
var sandboxEnv = []string{
	"PATH=/usr/bin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONUNBUFFERED=1",
}

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
	Type   string            `json:"Type"`
	Config map[string]string `json:"Config"`
}

// containerSpec is everything buildCreate needs.
type containerSpec struct {
	image   string
	argv    []string
	limits  isolate.Limits
	weak    isolate.Weakening
	seccomp string // the full "seccomp=..." security option
	ws      *workspace.Workspace
	tmp     string // host tmpfs bound at /tmp
	labels  map[string]string
	cpus    string // HostConfig.SandboxCPUs; "" = not pinned

	// root is the sandbox's own mount of the rootfs ("" = none), and
	// rootDirs its top-level directories to bind over the image's.
	root     string
	rootDirs []string
}

// buildCreate renders the container: the same controls as
// `docker run --network none --read-only --user 65534:65534 --cap-drop ALL
// --security-opt no-new-privileges:true --security-opt seccomp=<policy>
// --memory M --memory-swap M --cpus C --pids-limit P --ulimit fsize,nofile,core
// --workdir /query`, plus the workspace binds (/query, /query/repo,
// /awf read-only and a noexec /tmp) and a
// size-capped json-file log that the backend reads back as the bounded capture.
func buildCreate(c containerSpec) createBody {
	l := c.limits
	network := "none"
	if c.weak.NoNetNS {
		network = "host"
	}
	var pids *int64
	if !c.weak.NoPidsLimit {
		p := l.Pids
		pids = &p
	}
	var capDrop []string
	if !c.weak.NilCapsConfig {
		capDrop = []string{"ALL"}
	}
	// The files of the root come from the sandbox's own mount, never from
	// the image layer that every container shares (see rootmount.go).
	mounts := rootBinds(c.root, c.rootDirs)
	mounts = append(mounts,
		// A host tmpfs (noexec, nosuid, nodev, sticky 1777): the Engine's own
		// tmpfs would copy the image's /tmp mode (0755) onto it.
		mount{Type: "bind", Source: c.tmp, Target: "/tmp", BindOptions: &bindOptions{Propagation: "rprivate"}},
		mount{Type: "bind", Source: c.ws.QueryDir(), Target: isolate.QueryDir, BindOptions: &bindOptions{Propagation: "rprivate"}},
	)
	if rd := c.ws.RepoDir(); rd != "" {
		mounts = append(mounts, mount{Type: "bind", Source: rd, Target: isolate.RepoDir, BindOptions: &bindOptions{Propagation: "rprivate"}})
	}
	mounts = append(mounts, mount{Type: "bind", Source: c.ws.AwfDir(), Target: "/awf", ReadOnly: true, BindOptions: &bindOptions{Propagation: "rprivate"}})
	logMax := 2*l.CaptureBytes + 4096
	return createBody{
		Image:           c.image,
		Cmd:             c.argv,
		Entrypoint:      []string{},
		Env:             sandboxEnv,
		WorkingDir:      isolate.QueryDir,
		User:            fmt.Sprintf("%d:%d", workspace.SandboxUID, workspace.SandboxGID),
		Hostname:        "query",
		Labels:          c.labels,
		NetworkDisabled: !c.weak.NoNetNS,
		HostConfig: hostConfig{
			NetworkMode:    network,
			ReadonlyRootfs: true,
			// The Engine's default on cgroup v1 hosts is the host's cgroup
			// namespace, which shows the sandbox the host's cgroup tree.
			CgroupnsMode: "private",
			CapDrop:      capDrop,
			SecurityOpt:  []string{"no-new-privileges:true", c.seccomp},
			Memory:       l.MemoryBytes,
			MemorySwap:   l.MemoryBytes,
			NanoCPUs:     l.CPUMilli * 1_000_000,
			// Disjoint from the agent's CPUs (invariant 8).
			CpusetCpus: c.cpus,
			PidsLimit:  pids,
			Ulimits: []ulimit{
				{Name: "fsize", Soft: l.FileSizeBytes, Hard: l.FileSizeBytes},
				{Name: "nofile", Soft: int64(l.NoFile), Hard: int64(l.NoFile)},
				{Name: "core", Soft: 0, Hard: 0},
			},
			ShmSize:   l.TmpTmpfsBytes,
			IpcMode:   "private",
			Mounts:    mounts,
			LogConfig: logConfig{Type: "json-file", Config: map[string]string{"max-size": strconv.FormatInt(logMax, 10), "max-file": "1"}},
			// Every host-wide counter and kernel information file (one list,
			// hostview's). This replaces the Engine's default list, which it
			// contains; create checks that the Engine kept it.
			MaskedPaths: hostview.SandboxMaskPaths(),
		},
	}
}
