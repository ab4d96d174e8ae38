package gvisor

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

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

// bundleSpec is what buildSpec needs.
type bundleSpec struct {
	desc    *specs.Spec // isolate.Describe of the template and the job
	rootFS  string
	ws      *workspace.Workspace
	cgroup  string // path below the hierarchy roots
	seccomp *specs.LinuxSeccomp
	runID   string
	invID   string
	sandbox string
}

// buildSpec renders the description of one job as its bundle: the
// description with the root replaced by the sandbox's own root mount, the
// repo view and the script directory by the workspace's, /query by a bind
// of the workspace's /query tmpfs (so the broker reads the answer from the
// host), the pre-made cgroup, the policy compiled for the Sentry, and the
// declared deviations (isolate.Deviations): the Sentry's own /proc and
// /dev instead of masks and device rules, and RLIMIT_NPROC as the job's
// process limit.
func buildSpec(b bundleSpec) (*specs.Spec, error) {
	s := *b.desc
	proc := *s.Process
	proc.Rlimits = slices.Clone(proc.Rlimits)
	if s.Linux.Resources.Pids != nil {
		// The Sentry's tasks are not host tasks, so the host pids cgroup
		// cannot count them. The Sentry enforces RLIMIT_NPROC itself, per
		// sandbox (it has its own user accounting), so it is the job's
		// process and thread limit here.
		n := uint64(*s.Linux.Resources.Pids.Limit)
		proc.Rlimits = append(proc.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: n, Soft: n})
	}
	s.Process = &proc
	s.Root = &specs.Root{Path: b.rootFS, Readonly: b.desc.Root.Readonly}
	// runsc mounts a /proc in every sandbox; this one is the Sentry's own.
	mounts := []specs.Mount{{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "nodev", "noexec"}}}
	for _, m := range b.desc.Mounts {
		m.Options = isolate.MountOptions(m)
		switch {
		case m.Destination == isolate.QueryDir:
			// The workspace's /query tmpfs has the description's size,
			// mode and owner; the bind keeps every flag.
			m.Type, m.Source = "bind", b.ws.QueryDir()
			m.Options = append([]string{"rbind", "rw"}, onlyFlags(m.Options)...)
		case m.Source == isolate.SourceRepo:
			m.Source = b.ws.RepoDir()
		case m.Source == isolate.SourceScript:
			m.Source = b.ws.AwfDir()
		case m.Type == "bind":
			return nil, fmt.Errorf("gvisor: bind of %s has no source in this backend", m.Source)
		}
		mounts = append(mounts, m)
	}
	s.Mounts = mounts
	ann := maps.Clone(b.desc.Annotations)
	ann[annotationRun], ann[annotationInvocation], ann[annotationSandbox] = b.runID, b.invID, b.sandbox
	s.Annotations = ann
	lx := *b.desc.Linux
	res := *lx.Resources
	// The Sentry's /dev is its own (see isolate.Deviations): no host
	// device is reachable, so there are neither nodes nor device rules.
	res.Devices = nil
	lx.Resources = &res
	lx.Devices = nil
	// runsc ignores linux.maskedPaths and readonlyPaths (measured:
	// /proc/meminfo and /sys stay readable): its /proc and /sys are the
	// Sentry's own, per sandbox, and show no host counter that one sandbox
	// can move for the next (TestSentryViewDoesNotMove).
	lx.MaskedPaths, lx.ReadonlyPaths = nil, nil
	lx.Namespaces = slices.Clone(lx.Namespaces)
	lx.CgroupsPath = "/" + b.cgroup
	lx.Seccomp = b.seccomp
	s.Linux = &lx
	return &s, nil
}

// onlyFlags drops the tmpfs data options (mode, size, uid, gid) of opts.
func onlyFlags(opts []string) []string {
	return slices.DeleteFunc(slices.Clone(opts), func(o string) bool { return strings.Contains(o, "=") })
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
