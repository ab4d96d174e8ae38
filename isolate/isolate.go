// Package isolate defines the sandbox runtime contract shared by every backend:
// what a sandbox is given (Template and Job), the resource limits it runs under,
// and the typed Outcome it reports.
//
// A backend lives in its own sub-package (direct, gvisor, docker, sbx) and
// implements Runtime. The broker never looks inside a backend: it prepares a
// Sandbox from a Template (possibly before any request has arrived, so that a
// warm pool can hold ready sandboxes), runs exactly one Job in it, and destroys
// it. A Sandbox is single-use.
//
// Outcomes are for the operator and the audit log only. Nothing in an Outcome
// other than a validated, canonicalised Output ever reaches a caller.
package isolate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/awf-project/awf/policy"
)

// Kind is the typed result of running one job in a sandbox.
type Kind string

// The outcome kinds. Their string values appear in the audit log and in
// verify reports, so they are part of the operator-facing contract.
const (
	KindOK             Kind = "ok"
	KindTimeout        Kind = "timeout"
	KindOOM            Kind = "oom"
	KindPidsLimit      Kind = "pids-limit"
	KindFileSizeLimit  Kind = "file-size-limit"
	KindSeccompKill    Kind = "seccomp-kill"
	KindNonzeroExit    Kind = "nonzero-exit"
	KindOutputMissing  Kind = "output-missing"
	KindOutputTooLarge Kind = "output-too-large"
	KindOutputInvalid  Kind = "output-invalid" // present but not a regular file, or unreadable
	KindLaunchFailed   Kind = "launch-failed"
	KindCleanupFailed  Kind = "cleanup-failed"
)

// Kinds returns every outcome kind, in a stable order, a fresh slice each
// call.
func Kinds() []Kind {
	return []Kind{
		KindOK, KindTimeout, KindOOM, KindPidsLimit, KindFileSizeLimit, KindSeccompKill,
		KindNonzeroExit, KindOutputMissing, KindOutputTooLarge, KindOutputInvalid,
		KindLaunchFailed, KindCleanupFailed,
	}
}

// Paths inside every sandbox. They are the same for all backends.
const (
	// QueryDir is the size-capped writable tmpfs that is the script's working directory.
	QueryDir = "/query"
	// RepoDir is the private writable view of exactly one repository.
	RepoDir = "/query/repo"
	// OutputPath is where the script writes its one answer.
	OutputPath = "/query/out"
	// ScriptPath is where the job's script is visible, read-only.
	ScriptPath = "/awf/query-script.py"
)

// MaxOutputBytes is the hard cap on /query/out. A larger file is KindOutputTooLarge.
const MaxOutputBytes = 8192

// Limits are the resource limits of one sandbox. Zero values are invalid:
// use DefaultLimits and override fields.
type Limits struct {
	MemoryBytes     int64         // cgroup memory limit; swap is always 0
	Pids            int64         // cgroup pids limit
	CPUMilli        int64         // CPU quota in thousandths of one CPU (1000 = one CPU)
	FileSizeBytes   int64         // RLIMIT_FSIZE
	NoFile          uint64        // RLIMIT_NOFILE
	Wall            time.Duration // wall-clock deadline for the job, from launch to exit
	QueryTmpfsBytes int64         // size of the /query tmpfs
	RepoUpperBytes  int64         // size of the tmpfs that holds the repo overlay's upper layer
	TmpTmpfsBytes   int64         // size of the noexec /tmp tmpfs
	OutputBytes     int64         // cap on /query/out (at most MaxOutputBytes)
	CaptureBytes    int64         // cap on captured stdout and on captured stderr, each
}

// DefaultLimits returns the limits used when the operator configures nothing.
func DefaultLimits() Limits {
	return Limits{
		MemoryBytes:     512 << 20,
		Pids:            128,
		CPUMilli:        1000,
		FileSizeBytes:   64 << 20,
		NoFile:          256,
		Wall:            60 * time.Second,
		QueryTmpfsBytes: 64 << 20,
		RepoUpperBytes:  256 << 20,
		TmpTmpfsBytes:   16 << 20,
		OutputBytes:     MaxOutputBytes,
		CaptureBytes:    64 << 10,
	}
}

// Validate reports the first limit that is out of range.
func (l Limits) Validate() error {
	switch {
	case l.MemoryBytes < 16<<20:
		return fmt.Errorf("limits: memory %d bytes is below 16 MiB", l.MemoryBytes)
	case l.Pids < 8:
		return fmt.Errorf("limits: pids %d is below 8", l.Pids)
	case l.CPUMilli < 10:
		return fmt.Errorf("limits: cpu %d milli-CPUs is below 10", l.CPUMilli)
	case l.FileSizeBytes < 1<<20:
		return fmt.Errorf("limits: file size %d bytes is below 1 MiB", l.FileSizeBytes)
	case l.NoFile < 32:
		return fmt.Errorf("limits: nofile %d is below 32", l.NoFile)
	case l.Wall <= 0:
		return fmt.Errorf("limits: wall-clock deadline %v must be positive", l.Wall)
	case l.QueryTmpfsBytes < 1<<20 || l.RepoUpperBytes < 1<<20 || l.TmpTmpfsBytes < 1<<20:
		return errors.New("limits: every tmpfs must be at least 1 MiB")
	case l.OutputBytes <= 0 || l.OutputBytes > MaxOutputBytes:
		return fmt.Errorf("limits: output cap %d must be in 1..%d", l.OutputBytes, MaxOutputBytes)
	case l.CaptureBytes < 0:
		return errors.New("limits: capture cap must not be negative")
	}
	return nil
}

// Template is everything about a sandbox that is known before a request
// arrives: which root, which repository view, which limits and which policy.
// A Runtime may build a Sandbox from a Template ahead of time.
type Template struct {
	// RunID names the broker run. Every resource the sandbox creates carries it.
	RunID string
	// RootFS is the verified, read-only root filesystem directory.
	RootFS string
	// Repo is the read-only seed directory that becomes /query/repo through a
	// private writable layer. Empty means no repository view.
	Repo string
	// Limits are the resource limits.
	Limits Limits
	// Policy is the seccomp policy. A nil Policy is an error: backends fail closed.
	Policy *policy.Policy
	// Network, when set, is the sandbox's one network peer (a bounded-agent
	// enclave, isolate/enclave): the sandbox joins that namespace instead of
	// a new empty one. Nil is no network at all.
	Network *Network
	// Weaken deliberately removes controls. It exists only so that verify's own
	// tests can prove that its probes fail; nothing reachable from configuration
	// or from a request may set it.
	Weaken Weakening
}

// Network is an existing network namespace whose only link leads to Peer.
// The namespace, its link and its filters belong to whoever made it
// (isolate/enclave); a backend only joins it and confines the job to it.
type Network struct {
	// NetNS is the path of the network namespace to join.
	NetNS string
	// Peer is the one address and port the sandbox may reach.
	Peer netip.AddrPort
	// Confine, when set, is called with the host pid of the job's first
	// process before that process runs the job, and with the sandbox's own
	// cgroup v2 directory ("" when it has none, as on a hybrid host). It
	// attaches the per-process controls (cgroup socket hooks). An error
	// fails the launch.
	Confine func(pid int, cgroupV2 string) error
}

// Weakening lists controls that tests may remove to prove that probes can fail.
// The zero value removes nothing.
type Weakening struct {
	NoNetNS       bool // share the host network namespace
	NoSeccomp     bool // load no seccomp filter
	NoPidsLimit   bool // set no pids limit
	NilCapsConfig bool // pass a nil capability set (keeps the bounding set)
	HostView      bool // direct only: mount /proc and mask none of hostview's counters
}

// Any reports whether any control is weakened.
func (w Weakening) Any() bool {
	return w.NoNetNS || w.NoSeccomp || w.NoPidsLimit || w.NilCapsConfig || w.HostView
}

// Job is the per-request part: what to run. The broker is generic over kinds
// of job; a bounded query is a Python script, a bounded agent is a fixed
// program with a task.
type Job struct {
	// InvocationID names this invocation. Resources carry it with the RunID.
	InvocationID string
	// Script is placed read-only at ScriptPath.
	Script []byte
	// Argv is the command to run. Empty means DefaultArgv.
	Argv []string
	// OnStart, when set, is called with the host pid of the job's first
	// process once it runs under every control (after seccomp is loaded) and
	// before the runtime waits for it. verify uses it to read the loaded
	// filter. It must return quickly and must not keep the pid.
	OnStart func(hostPID int)
}

// DefaultArgv returns the argv that runs the job's script with the rootfs
// interpreter, isolated from the environment and user site directories. A
// fresh slice each call: every backend launches what it names, so no caller
// may change it for the others.
func DefaultArgv() []string {
	return []string{"/usr/bin/python3", "-I", "-S", "-B", ScriptPath}
}

// Spec is a Template plus a Job: one complete run.
type Spec struct {
	Template
	Job Job
}

// Timings records how long each phase of a run took.
type Timings struct {
	Prepare time.Duration
	Start   time.Duration
	Run     time.Duration
	Read    time.Duration
	Destroy time.Duration
}

// Outcome is the typed result of one job. Only Output, and only when Kind is
// KindOK, may go on to validation; everything else is for the audit log.
type Outcome struct {
	Kind     Kind
	Output   []byte // contents of /query/out, at most Limits.OutputBytes
	ExitCode int    // process exit status, -1 when killed by a signal or never started
	Signal   string // terminating signal name, if any
	Detail   string // one operator-readable sentence; audit only
	Stdout   []byte // captured, bounded; never returned to a caller
	Stderr   []byte // captured, bounded; never returned to a caller
	Timings  Timings
}

// Err builds an outcome of the given kind with a detail sentence.
func Err(kind Kind, format string, args ...any) Outcome {
	return Outcome{Kind: kind, ExitCode: -1, Detail: fmt.Sprintf(format, args...)}
}

// Sandbox is one prepared, single-use sandbox.
type Sandbox interface {
	// Exec runs job once and returns its outcome. A second call fails with KindLaunchFailed.
	Exec(ctx context.Context, job Job) Outcome
	// Destroy kills whatever runs and removes every resource. It is safe to call
	// more than once and must respect ctx's deadline.
	Destroy(ctx context.Context) error
}

// Runtime is a sandbox backend.
type Runtime interface {
	// Name is the backend's configuration name: direct, gvisor, docker or sbx.
	Name() string
	// Probe proves the backend can enforce every control on this host. It
	// returns a descriptive error when it cannot; callers fail closed.
	Probe(ctx context.Context) error
	// Prepare builds a sandbox from a template. It may run before any request
	// has arrived.
	Prepare(ctx context.Context, t Template) (Sandbox, error)
	// Run prepares a sandbox, executes the job, and destroys the sandbox. The
	// destroy time is inside the returned timings. A failed destroy turns any
	// outcome into KindCleanupFailed.
	Run(ctx context.Context, s Spec) Outcome
	// Sweep removes every resource left by runs other than the live one, for
	// example after a crash. It is called at start-up and at teardown.
	Sweep(ctx context.Context) error
	// Usable returns nil while the runtime is usable; once a sandbox could not
	// be reclaimed it returns the reason, and every later call fails closed.
	Usable() error
	// Close releases the runtime's own resources.
	Close() error
}

// Warmer is implemented by runtimes that can do a template's one-off work
// (for example a per-seed copy of the repository view) before the first
// request, so that it is not paid inside that request's timing bucket.
type Warmer interface {
	// Warm prepares whatever t needs ahead of Prepare. It must be safe to call
	// more than once and must respect ctx's deadline.
	Warm(ctx context.Context, t Template) error
}

// DefaultCgroupParent is the dedicated parent cgroup of the sandboxes when
// the operator names none: awf run's, verify's and every backend's. One
// name, so that a host's sandboxes, and their agents' groups beside them
// (see broker/host), are found under one parent whichever part made them.
const DefaultCgroupParent = "awf"

// Parent returns h.CgroupParent, or DefaultCgroupParent when it is empty.
func (h HostConfig) Parent() string {
	if h.CgroupParent == "" {
		return DefaultCgroupParent
	}
	return h.CgroupParent
}

// HostConfig is what a runtime needs from the host and from the operator.
type HostConfig struct {
	// RunID names the current broker run.
	RunID string
	// StateDir is a private (0700) directory owned by this runtime for
	// journals, state and per-invocation scratch. It must not be inside the
	// directory that holds the awf binary.
	StateDir string
	// CgroupParent is the name of the dedicated parent cgroup; empty means
	// DefaultCgroupParent (see Parent).
	CgroupParent string
	// RunscPath is the runsc binary for the gvisor backend ("" = look up PATH).
	RunscPath string
	// DockerSocket is the Engine's Unix socket for the docker backend.
	DockerSocket string
	// SandboxCPUs is the kernel CPU list ("3", "2-3") every sandbox is
	// confined to (cpuset), disjoint from the agent's so that a live sandbox
	// cannot be timed through a shared core. "" means no pinning; awf run
	// leaves it empty only on a one-CPU host, where there is nothing to split.
	SandboxCPUs string
	// Progress receives operator-readable lines about one-off work that
	// takes seconds (the docker backend's first import of a rootfs image).
	// nil means none.
	Progress io.Writer
}

// RunWithSandbox implements Runtime.Run on top of Prepare, Exec and Destroy,
// so every backend gets the same semantics.
func RunWithSandbox(ctx context.Context, r Runtime, s Spec) Outcome {
	return RunIn(ctx, r, func(ctx context.Context) (Sandbox, error) { return r.Prepare(ctx, s.Template) }, s.Job)
}

// RunIn is RunWithSandbox with the sandbox's source left to the caller:
// prepare returns a fresh sandbox (a warm pool hands out one it prepared
// earlier), job runs in it once, and it is destroyed. Its Timings.Prepare is
// the time prepare took.
func RunIn(ctx context.Context, r Runtime, prepare func(context.Context) (Sandbox, error), job Job) Outcome {
	if err := r.Usable(); err != nil {
		return Err(KindLaunchFailed, "runtime %s unusable: %v", r.Name(), err)
	}
	t0 := time.Now()
	sb, err := prepare(ctx)
	prep := time.Since(t0)
	if err != nil {
		o := Err(KindLaunchFailed, "prepare: %v", err)
		o.Timings.Prepare = prep
		return o
	}
	out := sb.Exec(ctx, job)
	out.Timings.Prepare = prep
	t1 := time.Now()
	out, _ = DestroyAfter(ctx, sb, out, 10*time.Second, "destroy")
	out.Timings.Destroy = time.Since(t1)
	return out
}

// DestroyAfter destroys sb, whose job ended with out, within d of its own:
// Destroy must run even when ctx is already done. It returns out and true,
// or, when Destroy fails, false and a cleanup-failed outcome whose detail
// is what (the caller's name for the step), out's kind and the error,
// keeping out's exit code and timings.
func DestroyAfter(ctx context.Context, sb interface{ Destroy(context.Context) error }, out Outcome, d time.Duration, what string) (Outcome, bool) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	if err := sb.Destroy(dctx); err != nil {
		return Outcome{Kind: KindCleanupFailed, ExitCode: out.ExitCode, Detail: fmt.Sprintf("%s after %s: %v", what, out.Kind, err), Timings: out.Timings}, false
	}
	return out, true
}
