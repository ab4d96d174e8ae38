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

// mountHintPrefix starts runsc's mount hint annotations: for a hint named
// N, N.source names the host directory of a bind in the spec, N.type its
// type and N.share who else uses it ("container": nobody but this
// container).
const mountHintPrefix = "dev.gvisor.spec.mount."

// exclusiveHints are the binds whose host directories nobody but the
// sandbox touches while it runs, by the name of their hint.
var exclusiveHints = map[string]string{isolate.QueryDir: "awf-query", isolate.RepoDir: "awf-repo"}

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
	for _, m := range mounts {
		if name, ok := exclusiveHints[m.Destination]; ok && m.Type == "bind" {
			hintExclusive(ann, name, m.Source)
		}
	}
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

// hintExclusive tells runsc that only this container uses the bind of
// source: the Sentry then caches the bind's dentries and metadata as
// authoritative (runsc's "exclusive" file access, the default for the root
// and --file-access-mounts=shared for every other bind) instead of
// revalidating each path component with the gofer at every lookup.
// Measured on a 10,000-file tree walk under ptrace: 6 gofer round trips
// per file opened become 2 (a walk and an open), and the walk takes about
// 40% less time (docs/PERFORMANCE.md).
//
// It is sound for /query and /query/repo, and only for them: the host
// writes the /query tmpfs and the repository overlay only in
// workspace.Create, before runsc starts, and reads them (the answer, the
// file-size check) only after the sandbox is gone; the overlay's lower
// layer is a repository view, complete before any overlay uses it and
// never written after, and its upper is this sandbox's own tmpfs. /awf is
// not hinted: Exec places the script there while a prepared sandbox
// waits. File data is not cached either way: the Sentry reads, writes
// and maps a regular file through the host descriptor the gofer hands it,
// so what a job writes, even through a mapping, is in the host file when
// the broker reads it (TestExclusiveBindsWriteThrough). The caches are the
// Sentry's, per sandbox, and die with it.
func hintExclusive(ann map[string]string, name, source string) {
	ann[mountHintPrefix+name+".source"] = source
	ann[mountHintPrefix+name+".type"] = "bind"
	ann[mountHintPrefix+name+".share"] = "container"
}

// dropMountHints removes every mount hint from ann.
func dropMountHints(ann map[string]string) {
	maps.DeleteFunc(ann, func(k, _ string) bool { return strings.HasPrefix(k, mountHintPrefix) })
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
