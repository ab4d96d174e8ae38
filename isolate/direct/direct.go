// Package direct is the default sandbox backend: it builds namespaces, cgroups,
// seccomp and mounts itself through runc's libcontainer, with no container engine.
//
// A sandbox is prepared ahead of its job: Prepare creates the container and
// starts libcontainer's init, which sets up every namespace, mount, limit and
// the seccomp filter and then blocks before exec; Prepare then releases it
// to exec the interpreter's bootstrap (isolate.BootstrapArgv), which loads
// the usual modules and blocks reading its script from an inherited pipe.
// Exec places the script read-only at isolate.ScriptPath, hands the same
// bytes over the pipe, enforces the wall-clock deadline (from Exec on, not
// while the sandbox waits), and reads the counters and /query/out from the
// outside. A cold Run goes through the same Prepare and Exec, so a script
// cannot tell a sandbox that waited from one made for it. A job with
// another argv gets a sandbox of its own whose init execs it at Exec. Every container,
// cgroup, mount and scratch directory is journalled under the state
// directory before it is created, so Sweep can reclaim whatever a crashed
// broker left.
//
// Names: a sandbox is prepared before its request exists, so its container,
// cgroup leaf and scratch directory are named awf-<run id>-<sequence>; the
// journal entry records the run id and, from Exec on, the invocation id.
// State directory layout: libct/ (libcontainer state), journal/ (one JSON
// entry per resource), sb/<name>/ (per-sandbox tmpfs holding the script
// directory bound read-only at /awf and the repo overlay's upper and work
// directories), roots/ (the root store: a ramfs holding, on a ramfs of its
// own, the verified read-only root tree every sandbox uses as its root; see
// rootmount.go), views/ (the
// store of this runtime's copies of its seeds, owned by the sandbox user,
// the repo overlays' lower layers; see view.go) and lock.
//
// Cgroups: on cgroup v2 every sandbox gets a leaf under a dedicated parent
// (HostConfig.CgroupParent, default "awf"), below the broker's own cgroup
// when a service manager delegated it (the broker then moves itself into a
// "supervisor" leaf), else below the root; memory.max, memory.swap.max=0,
// pids.max, cpu.max and memory.oom.group=1 are set, and cgroup.kill ends a
// timed-out sandbox. On hybrid hosts the v1 controllers are used, with
// memory+swap equal to memory. CgroupMode reports which.
package direct

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/seccomp"
	"golang.org/x/sys/unix"

	// The nsenter constructor must run before the Go runtime in the init
	// re-exec, and the devices package lets the cgroup managers apply
	// device rules.
	_ "github.com/opencontainers/cgroups/devices"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/policy"
)

// Name is the backend's configuration name.
const Name = "direct"

// InitIfRequested must be called from an init function of every binary that
// uses this package. When the process was started as libcontainer's container
// init it never returns.
//
// Otherwise it locks the main goroutine to the process's main thread, for
// the life of the process. While a sandbox starts, libcontainer joins the
// container's mount namespace from a goroutine locked to its OS thread and
// then lets that goroutine end without unlocking, so that the Go runtime
// discards the thread. The Go runtime cannot discard the main thread: if
// that goroutine had run there, the main thread would stay parked in the
// sandbox's mount namespace and keep its mounts (the repo overlay among
// them) alive for as long as the process runs. Locking the main goroutine
// to the main thread during init (which is also where main runs) means no
// other goroutine is ever scheduled on the main thread, so libcontainer
// never gets it.
func InitIfRequested() {
	if len(os.Args) > 1 && os.Args[1] == "init" && os.Getenv("_LIBCONTAINER_INITPIPE") != "" {
		libcontainer.Init() // never returns
	}
	runtime.LockOSThread()
}

// idPattern is what a cgroup parent and a swept container name may contain:
// they become parts of cgroup names and paths. Run ids follow
// workspace.ValidID, the rule every backend applies.
var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`) })

// Runtime is the direct backend. It owns HostConfig.StateDir exclusively
// while it is open.
type Runtime struct {
	runID     string
	state     string // StateDir, absolute
	libct     string // libcontainer state root
	journal   string // journal directory
	scratch   string // per-sandbox scratch directories
	roots     string // root filesystem image stores (see rootmount.go)
	viewDir   string // holds the repository view store (see view.go)
	cg        cgroupSetup
	lock      *os.File
	inst      string // random per instance: sandbox names are unique across instances of one run
	seq       atomic.Uint64
	mu        sync.Mutex
	active    map[string]bool       // journal names of live resources
	images    *workspace.RootImages // nil until the first sandbox or Warm; guarded by mu
	imgEntry  string                // journal name of the image store; guarded by mu
	views     *workspace.RepoViews  // made by Open, on disk from the first view on
	viewEntry string                // journal name of the view store, "" until then; guarded by mu
	policies  map[*policy.Policy]*configs.Seccomp
	broken    atomic.Pointer[error]
	closed    atomic.Bool
}

// New returns the direct runtime. It takes an exclusive lock on the state
// directory, sets up the dedicated parent cgroup, and does not sweep: the
// caller runs Sweep at start-up.
func New(h isolate.HostConfig) (isolate.Runtime, error) {
	r, err := Open(h)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ErrNoSeccompBuild means the binary was built without the seccomp build
// tag. libcontainer then compiles a stub that cannot install any filter, and
// every start would fail deep inside init; Open refuses up front instead.
var ErrNoSeccompBuild = errors.New("direct: this binary was built without the seccomp build tag, " +
	"so it cannot install a seccomp filter and refuses to run sandboxes; " +
	"rebuild with CGO_ENABLED=1 and -tags=seccomp (make build does)")

// Open is New with the concrete type, for callers that need CgroupMode.
func Open(h isolate.HostConfig) (*Runtime, error) {
	if !seccomp.Enabled {
		return nil, ErrNoSeccompBuild
	}
	if err := workspace.ValidID("run", h.RunID); err != nil {
		// The rule every backend applies to run ids.
		return nil, fmt.Errorf("direct: %w", err)
	}
	if h.StateDir == "" || !filepath.IsAbs(h.StateDir) {
		return nil, fmt.Errorf("direct: state dir %q must be an absolute path", h.StateDir)
	}
	h.CgroupParent = h.Parent()
	if !idPattern().MatchString(h.CgroupParent) {
		return nil, fmt.Errorf("direct: cgroup parent %q must match %s", h.CgroupParent, idPattern())
	}
	state := filepath.Clean(h.StateDir)
	if err := checkOutsideExe(state); err != nil {
		return nil, err
	}
	// Several instances serve one run (the query, sealed-probe and
	// bounded-agent brokers each open one, on state dirs of their own) and
	// share the cgroup parent: a per-instance part keeps one's sandbox
	// names, and so cgroups, from ever being another's.
	inst, err := workspace.NewSandboxID()
	if err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	r := &Runtime{
		runID:    h.RunID,
		inst:     inst[:8],
		state:    state,
		libct:    filepath.Join(state, "libct"),
		journal:  filepath.Join(state, "journal"),
		scratch:  filepath.Join(state, "sb"),
		roots:    filepath.Join(state, "roots"),
		viewDir:  filepath.Join(state, "views"),
		active:   map[string]bool{},
		policies: map[*policy.Policy]*configs.Seccomp{},
	}
	if r.views, err = newViewStore(h.RunID, r.viewDir); err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	for _, d := range []string{state, r.libct, r.journal, r.scratch, r.roots, r.viewDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("direct: state dir: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("direct: state dir: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(state, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("direct: state lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("direct: state dir %s is in use by another runtime: %w", state, err)
	}
	r.lock = lock
	cg, err := setupCgroups(h.CgroupParent, h.SandboxCPUs)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("direct: %w", err)
	}
	r.cg = cg
	return r, nil
}

// checkOutsideExe refuses a state dir that overlaps the running binary's
// directory: libcontainer would then fall back to copying the whole binary
// on every start.
func checkOutsideExe(state string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("direct: locate own binary: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	dir := filepath.Dir(exe)
	if within(state, dir) || within(dir, state) {
		return fmt.Errorf("direct: state dir %s overlaps the binary's directory %s", state, dir)
	}
	return nil
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// Name implements isolate.Runtime.
func (r *Runtime) Name() string { return Name }

// CgroupMode reports how this runtime places sandboxes: one of cgroupfs's
// modes (cgroupfs.Mode).
func (r *Runtime) CgroupMode() string { return r.cg.mode }

// CgroupParentPath is the absolute path of the dedicated parent cgroup (for
// v1, in the memory hierarchy).
func (r *Runtime) CgroupParentPath() string { return r.cg.parentPath() }

// Usable implements isolate.Runtime.
func (r *Runtime) Usable() error {
	if p := r.broken.Load(); p != nil {
		return *p
	}
	if r.closed.Load() {
		return errors.New("direct: runtime closed")
	}
	return nil
}

// markBroken makes the runtime fail closed from now on.
func (r *Runtime) markBroken(err error) {
	e := fmt.Errorf("direct: a sandbox could not be reclaimed: %w", err)
	r.broken.CompareAndSwap(nil, &e)
}

// Run implements isolate.Runtime.
func (r *Runtime) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	return isolate.RunWithSandbox(ctx, r, s)
}

// Close releases the root store, the repository views and the
// state lock. Live sandboxes must be destroyed first; anything left is for
// the next Sweep.
func (r *Runtime) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	var errs []error
	errs = append(errs, r.closeViews())
	errs = append(errs, r.closeImages())
	if r.lock != nil {
		errs = append(errs, r.lock.Close())
	}
	return errors.Join(errs...)
}
