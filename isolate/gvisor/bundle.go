package gvisor

import (
	"encoding/json"
	"fmt"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// Annotations that label every container with its run and invocation.
const (
	annotationRun        = "awf.run"
	annotationInvocation = "awf.invocation"
	annotationSandbox    = "awf.sandbox"
)

// sandboxEnv is the whole environment of a job.
var sandboxEnv = []string{
	"PATH=/usr/bin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONUNBUFFERED=1",
}

// bundleSpec is what buildSpec needs.
type bundleSpec struct {
	rootFS  string
	limits  isolate.Limits
	weak    isolate.Weakening
	argv    []string
	ws      *workspace.Workspace
	cgroup  string // path below the hierarchy roots
	seccomp *specs.LinuxSeccomp
	runID   string
	invID   string
	sandbox string
}

// buildSpec renders the OCI runtime spec of one job: read-only root, uid
// 65534 with no capabilities and no-new-privileges, rlimits, the /query and
// /query/repo binds from the workspace, the read-only script directory, a
// noexec /tmp, private namespaces, the pre-made cgroup and the seccomp policy.
func buildSpec(b bundleSpec) *specs.Spec {
	caps := &specs.LinuxCapabilities{
		Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{},
	}
	if b.weak.NilCapsConfig {
		caps = nil
	}
	l := b.limits
	tmpOpts := func(size int64, mode string, extra ...string) []string {
		return append([]string{"nosuid", "nodev", fmt.Sprintf("size=%d", size), "mode=" + mode}, extra...)
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "nodev", "noexec"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: tmpOpts(64<<10, "755", "noexec")},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: tmpOpts(l.TmpTmpfsBytes, "1777", "noexec")},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: tmpOpts(l.TmpTmpfsBytes, "1777", "noexec")},
		{Destination: isolate.QueryDir, Type: "bind", Source: b.ws.QueryDir(), Options: []string{"rbind", "rw", "nosuid", "nodev"}},
	}
	if r := b.ws.RepoDir(); r != "" {
		mounts = append(mounts, specs.Mount{Destination: isolate.RepoDir, Type: "bind", Source: r, Options: []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	mounts = append(mounts, specs.Mount{Destination: "/awf", Type: "bind", Source: b.ws.AwfDir(), Options: []string{"rbind", "ro", "nosuid", "nodev"}})

	ns := []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}}
	if !b.weak.NoNetNS {
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	mem, swap := l.MemoryBytes, l.MemoryBytes
	quota, period := l.CPUMilli*100, uint64(100000)
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &swap},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
	}
	if !b.weak.NoPidsLimit {
		pids := l.Pids
		res.Pids = &specs.LinuxPids{Limit: &pids}
	}
	rl := []specs.POSIXRlimit{
		{Type: "RLIMIT_FSIZE", Hard: uint64(l.FileSizeBytes), Soft: uint64(l.FileSizeBytes)},
		{Type: "RLIMIT_NOFILE", Hard: l.NoFile, Soft: l.NoFile},
		{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
	}
	if !b.weak.NoPidsLimit {
		// The Sentry's tasks are not host tasks, so the host pids cgroup
		// cannot count them. The Sentry enforces RLIMIT_NPROC itself, per
		// sandbox (it has its own user accounting), so it is the job's
		// process and thread limit here.
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: uint64(l.Pids), Soft: uint64(l.Pids)})
	}
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Terminal:        false,
			User:            specs.User{UID: workspace.SandboxUID, GID: workspace.SandboxGID},
			Args:            b.argv,
			Env:             sandboxEnv,
			Cwd:             isolate.QueryDir,
			Capabilities:    caps,
			NoNewPrivileges: true,
			Rlimits:         rl,
		},
		Root:     &specs.Root{Path: b.rootFS, Readonly: true},
		Hostname: "query",
		Mounts:   mounts,
		Annotations: map[string]string{
			annotationRun:        b.runID,
			annotationInvocation: b.invID,
			annotationSandbox:    b.sandbox,
		},
		Linux: &specs.Linux{
			Namespaces:  ns,
			CgroupsPath: "/" + b.cgroup,
			Resources:   res,
			Seccomp:     b.seccomp,
			// No MaskedPaths: runsc ignores them (measured: /proc/meminfo
			// and /sys stay readable). Its /proc and /sys are the Sentry's
			// own, per sandbox, and show no host counter that one sandbox
			// can move for the next (TestSentryViewDoesNotMove).
		},
	}
}

// writeBundle writes config.json into dir, which it creates.
func writeBundle(dir string, s *specs.Spec) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("bundle dir: %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode bundle: %w", err)
	}
	if err := os.WriteFile(dir+"/config.json", b, 0o600); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}
