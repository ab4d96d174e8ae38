package direct

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/workspace"
)

// Deadlines for steps that have no context of their own.
const (
	killWait      = 5 * time.Second // from SIGKILL to a reaped init
	scriptMode    = 0o444
	maxScriptSize = isolate.ScriptDirBytes / 2
)

// errStartAbandoned means Prepare's context ended while libcontainer was
// starting init; the sandbox is torn down in the background.
var errStartAbandoned = errors.New("start abandoned")

// scratchDirs are one sandbox's host directories, all on its scratch tmpfs
// (awf on a tmpfs of its own inside it).
type scratchDirs struct {
	root  string // tmpfs mount point
	awf   string // bound read-only at /awf; holds the script (isolate.ScriptDirBytes)
	upper string // overlay upper layer
	work  string // overlay work dir
}

func newScratch(root string) scratchDirs {
	return scratchDirs{root: root, awf: filepath.Join(root, "awf"), upper: filepath.Join(root, "upper"),
		work: filepath.Join(root, "work")}
}

// sandbox is one prepared, single-use direct sandbox.
type sandbox struct {
	r    *Runtime
	t    isolate.Template
	id   string
	ent  entry
	sc   scratchDirs
	tree *workspace.RootTree // the container root, shared and read-only (rootmount.go)
	view *workspace.RepoView // lower layer of the repo overlay; nil without a repo
	argv []string            // the job argv it was prepared for (Exec compares)
	enc  *enclave.Layout     // an enclave's filesystem instead of /query and /awf; nil for a query
	// handoff is the write end of the bootstrap's descriptor when the
	// sandbox runs the default interpreter (isolate.BootstrapArgv): its
	// python3 starts in Prepare and waits there for the script. Nil for
	// any other argv, whose init is released by Exec.
	handoff *os.File
	// bootRead is the bootstrap's end of that pipe, init's descriptor 3.
	// The broker's copy is closed as soon as Start returns (never before:
	// Start may still be forking after an abandoned Prepare).
	bootRead *os.File
	ctr      *libcontainer.Container
	proc     *libcontainer.Process
	pid      int
	qfd      int // O_PATH fd of the sandbox's /query, -1 when closed
	stdout   *workspace.Capture
	stderr   *workspace.Capture
	done     chan struct{} // closed when init has been reaped
	// released is closed when the sandbox is reclaimed; it frees the
	// thread init was forked from even if init was never waited for.
	released chan struct{}
	ps       *os.ProcessState
	werr     error

	mu        sync.Mutex
	used      bool
	destroyed bool
}

// Prepare implements isolate.Runtime: it creates the container and starts
// its init, which sets up every control and waits before exec; then it
// releases init, which execs the interpreter's bootstrap under every
// control. The bootstrap loads its modules and blocks reading its script,
// so that Exec only hands the script over. The wall-clock deadline does
// not run while it waits.
func (r *Runtime) Prepare(ctx context.Context, t isolate.Template) (isolate.Sandbox, error) {
	return r.prepare(ctx, t, isolate.DefaultArgv(), nil)
}

func (r *Runtime) prepare(ctx context.Context, t isolate.Template, argv []string, enc *enclave.Layout) (*sandbox, error) {
	if err := r.Usable(); err != nil {
		return nil, err
	}
	if err := checkTemplate(t); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("direct: prepare: %w", err)
	}
	tree, err := r.rootTree(ctx, t.RootFS)
	if err != nil {
		return nil, err
	}
	var view *workspace.RepoView
	if t.Repo != "" {
		if view, err = r.acquireView(ctx, t.Repo); err != nil {
			return nil, fmt.Errorf("direct: prepare: %w", err)
		}
	}
	id := fmt.Sprintf("awf-%s-%s-%d", r.runID, r.inst, r.seq.Add(1))
	sb := &sandbox{
		r: r, t: t, id: id, sc: newScratch(filepath.Join(r.scratch, id)), tree: tree, view: view, argv: argv, enc: enc, qfd: -1,
		stdout: &workspace.Capture{Max: t.Limits.CaptureBytes}, stderr: &workspace.Capture{Max: t.Limits.CaptureBytes},
		done: make(chan struct{}), released: make(chan struct{}),
	}
	sb.ent = entry{
		Kind: entrySandbox, Name: id, RunID: r.runID, Container: id, Scratch: sb.sc.root,
		CgroupPaths: r.cg.leafPaths(id), Created: time.Now().UTC(),
	}
	if err := r.track(sb.ent); err != nil {
		if view != nil {
			r.releaseView(view)
		}
		return nil, err
	}
	if err := sb.start(ctx); err != nil {
		if errors.Is(err, errStartAbandoned) {
			return nil, fmt.Errorf("direct: prepare: %w", err)
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := sb.Destroy(dctx); derr != nil {
			return nil, fmt.Errorf("direct: prepare: %w (and cleanup: %v)", err, derr)
		}
		return nil, fmt.Errorf("direct: prepare: %w", err)
	}
	return sb, nil
}

// checkTemplate validates what Prepare is given.
func checkTemplate(t isolate.Template) error {
	if err := t.Limits.Validate(); err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	if t.Policy == nil && !t.Weaken.NoSeccomp {
		return errors.New("direct: no seccomp policy: failing closed")
	}
	if !filepath.IsAbs(t.RootFS) {
		return fmt.Errorf("direct: rootfs %q must be absolute", t.RootFS)
	}
	if t.Repo != "" {
		return checkRepo(t.Repo)
	}
	return nil
}

// checkRepo validates a seed directory's path.
func checkRepo(repo string) error {
	if !filepath.IsAbs(repo) || strings.ContainsAny(repo, ",:\\\n") {
		return fmt.Errorf("direct: repo path %q must be absolute and free of , : \\", repo)
	}
	fi, err := os.Stat(repo)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("direct: repo %s is not a directory", repo)
	}
	return nil
}

// track journals e and marks it live.
func (r *Runtime) track(e entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trackLocked(e)
}

// trackLocked is track for a caller that holds r.mu.
func (r *Runtime) trackLocked(e entry) error {
	if err := writeJournal(r.journal, e); err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	r.active[e.Name] = true
	return nil
}

// untrack removes a reclaimed resource from the journal.
func (r *Runtime) untrack(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, name)
	return removeJournal(r.journal, name)
}

// start makes the scratch tmpfs, creates the container and starts init.
func (sb *sandbox) start(ctx context.Context) error {
	l := sb.t.Limits
	// The scratch tmpfs holds the repo overlay's upper layer alone, so
	// that /query/repo has the size of every backend's; the script's
	// directory is a tmpfs of its own inside it, as every backend's is.
	if err := os.MkdirAll(filepath.Dir(sb.sc.root), 0o700); err != nil {
		return fmt.Errorf("scratch: %w", err)
	}
	if err := workspace.MountTmpfs(sb.sc.root, l.RepoUpperBytes, 0o700, 0, 0); err != nil {
		return err
	}
	if err := workspace.MountTmpfs(sb.sc.awf, isolate.ScriptDirBytes, 0o755, 0, 0); err != nil {
		return err
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
		uid  int
	}{{sb.sc.upper, 0o755, isolate.SandboxUID}, {sb.sc.work, 0o700, 0}} {
		if err := os.Mkdir(d.path, d.mode); err != nil {
			return fmt.Errorf("scratch: %w", err)
		}
		if err := os.Chown(d.path, d.uid, d.uid); err != nil {
			return fmt.Errorf("scratch: %w", err)
		}
	}
	lower := ""
	if sb.view != nil {
		lower = sb.view.Dir()
	}
	launch := sb.argv
	if sb.enc == nil && isolate.IsDefaultArgv(sb.argv) {
		// One launch path for the default interpreter, whether the
		// sandbox waits in a pool or runs at once: a script cannot tell.
		launch = isolate.BootstrapArgv(isolate.BootstrapFD)
	}
	if sb.enc != nil || isolate.IsDefaultArgv(sb.argv) {
		// An enclave's program likewise starts here, waits on the same
		// descriptor and is handed an empty script as its start
		// (enclave.go).
		pr, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("bootstrap pipe: %w", err)
		}
		sb.bootRead, sb.handoff = pr, pw
	}
	d, err := sb.r.describe(sb.t, launch)
	if err != nil {
		return err
	}
	cfg, err := sb.r.containerConfig(sb.id, sb.tree.Dir, lower, sb.t, d, sb.sc)
	if err != nil {
		return err
	}
	if sb.enc != nil {
		if err := renderEnclave(*sb.enc, sb.sc.root, d, cfg); err != nil {
			return err
		}
	}
	ctr, err := libcontainer.Create(sb.r.libct, sb.id, cfg)
	if err != nil {
		return fmt.Errorf("create container: %w", err)
	}
	sb.ctr = ctr
	sb.proc = process(d, sb.stdout, sb.stderr)
	if sb.bootRead != nil {
		// Descriptor 3 (isolate.BootstrapFD): libcontainer passes extra
		// files in order from 3 and closes every other descriptor above
		// them before exec.
		sb.proc.ExtraFiles = []*os.File{sb.bootRead}
	}
	errc := make(chan error, 1)
	go sb.startOnOwnThread(errc)
	select {
	case err = <-errc:
	case <-ctx.Done():
		// Start has no context: let it finish in the background, then tear
		// the sandbox down. Prepare must not destroy it concurrently. Until
		// then init may still run (a start stuck on an unkillable init
		// never returns), so the runtime fails closed from now on rather
		// than start another sandbox beside it.
		sb.r.markBroken(fmt.Errorf("start of %s abandoned: %w", sb.id, ctx.Err()))
		go func() {
			if err := <-errc; err == nil {
				_ = sb.afterStart()
			}
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = sb.Destroy(dctx) // marks the runtime unusable on failure
		}()
		return fmt.Errorf("%w: %w", errStartAbandoned, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("start container: %w", err)
	}
	if err := sb.afterStart(); err != nil {
		return err
	}
	if err := sb.confineNetwork(); err != nil {
		return err
	}
	if err := sb.openQuery(); err != nil {
		return err
	}
	if sb.handoff != nil {
		return sb.release(ctx)
	}
	return nil
}

// release lets init exec the bootstrap, bounded by ctx. From here the
// interpreter runs, under every control, until its script arrives.
func (sb *sandbox) release(ctx context.Context) error {
	execErr := make(chan error, 1)
	go func() { execErr <- sb.ctr.Exec() }()
	select {
	case err := <-execErr:
		if err != nil {
			return fmt.Errorf("release init: %w%s", err, sb.initEnded())
		}
		return nil
	case <-ctx.Done():
		// Exec notices a dead init within 100 ms; teardown then reaps it.
		sb.kill()
		<-execErr
		return fmt.Errorf("release init: %w", ctx.Err())
	}
}

// abortStart kills the sandbox while Exec is still starting the job, and
// unblocks a handover stuck on a full pipe (the bootstrap cannot read any
// more once killed; the deadline covers one that is not gone yet).
func (sb *sandbox) abortStart() {
	sb.kill()
	if sb.handoff != nil {
		_ = sb.handoff.SetWriteDeadline(time.Now())
	}
}

// kill ends everything in the sandbox.
func (sb *sandbox) kill() {
	_ = sb.ctr.Signal(unix.SIGKILL)
	if sb.r.cg.v2() {
		sb.r.cg.killLeaf(sb.id)
	}
}

// startOnOwnThread starts init from an OS thread that lives until init is
// reaped. Init carries a parent-death signal (SIGKILL, so that a crashed
// broker takes its sandboxes with it), and the kernel sends it when the
// thread that forked init ends, not the process. The Go runtime ends threads
// whenever a goroutine exits locked to one, which libcontainer's own
// mount-source goroutine does on every start: a start from an ordinary
// goroutine can fork init from a thread that another sandbox's start then
// takes and ends, killing this init before it reads its bootstrap data
// ("write init-p: broken pipe") or at any later point of its life. The
// goroutine never unlocks, so the thread ends with it, after init is gone.
func (sb *sandbox) startOnOwnThread(errc chan<- error) {
	runtime.LockOSThread()
	err := sb.ctr.Start(sb.proc)
	if sb.bootRead != nil {
		_ = sb.bootRead.Close() // init has its own copy now
	}
	errc <- err
	if err != nil {
		// libcontainer has killed and reaped what it forked.
		return
	}
	select {
	case <-sb.done:
	case <-sb.released:
	}
}

// afterStart records init's pid and reaps it in the background.
func (sb *sandbox) afterStart() error {
	pid, err := sb.proc.Pid()
	if err != nil {
		return fmt.Errorf("init pid: %w", err)
	}
	sb.pid = pid
	go func() {
		sb.ps, sb.werr = sb.proc.Wait()
		close(sb.done)
	}()
	return nil
}

// openQuery opens the sandbox's /query from the outside.
func (sb *sandbox) openQuery() error {
	pid := sb.pid
	// Init has finished its mounts and pivot_root and waits on the exec
	// fifo: no untrusted code has run yet, so this path resolves inside the
	// sandbox's own /query tmpfs. The fd keeps that tmpfs alive after exit.
	dir := isolate.QueryDir
	if sb.enc != nil {
		dir = sb.enc.Out
	}
	qfd, err := unix.Open(fmt.Sprintf("/proc/%d/root%s", pid, dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open sandbox %s: %w%s", dir, err, sb.initEnded())
	}
	sb.qfd = qfd
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(qfd, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("sandbox %s is not its tmpfs", dir)
	}
	return nil
}

// initEnded explains a failed look into the sandbox: init ended after its
// start returned (a call its last steps need was refused, say), so its
// root is gone. It waits briefly for the reaper and says nothing when init
// still runs.
func (sb *sandbox) initEnded() string {
	select {
	case <-sb.done:
	case <-time.After(200 * time.Millisecond):
		return ""
	}
	st := exitStatus(sb.ps)
	how := fmt.Sprintf("exit status %d", st.code)
	if st.signal != "" {
		how = "signal " + st.signal
	}
	return fmt.Sprintf(" (sandbox init ended during its start: %s)", how)
}

// Exec implements isolate.Sandbox.
func (sb *sandbox) Exec(ctx context.Context, job isolate.Job) isolate.Outcome {
	sb.mu.Lock()
	if sb.used || sb.destroyed {
		sb.mu.Unlock()
		return isolate.Err(isolate.KindLaunchFailed, "sandbox %s already used", sb.id)
	}
	sb.used = true
	sb.mu.Unlock()
	if err := sb.r.Usable(); err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "%v", err)
	}
	argv := job.Argv
	if len(argv) == 0 {
		argv = isolate.DefaultArgv()
	}
	if !slices.Equal(argv, sb.argv) {
		return sb.execOther(ctx, job, argv)
	}
	return sb.exec(ctx, job)
}

// execOther runs a job whose argv differs from the prepared one: the argv
// is fixed when init starts, so it prepares a fresh sandbox for it.
func (sb *sandbox) execOther(ctx context.Context, job isolate.Job, argv []string) isolate.Outcome {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	err := sb.Destroy(dctx)
	cancel()
	if err != nil {
		return isolate.Err(isolate.KindCleanupFailed, "replace prepared sandbox: %v", err)
	}
	t0 := time.Now()
	other, err := sb.r.prepare(ctx, sb.t, slices.Clone(argv), sb.enc)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "prepare for argv: %v", err)
	}
	other.used = true
	out := other.exec(ctx, job)
	out.Timings.Start += time.Since(t0) - out.Timings.Run - out.Timings.Read
	dctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := other.Destroy(dctx); err != nil {
		return isolate.Outcome{Kind: isolate.KindCleanupFailed, ExitCode: out.ExitCode, Detail: fmt.Sprintf("destroy after %s: %v", out.Kind, err), Timings: out.Timings}
	}
	return out
}

// exec places the script, releases init, waits under the wall deadline and
// reads the verdict from the outside.
func (sb *sandbox) exec(ctx context.Context, job isolate.Job) isolate.Outcome {
	l := sb.t.Limits
	t0 := time.Now()
	if len(job.Script) > maxScriptSize {
		return isolate.Err(isolate.KindLaunchFailed, "script of %d bytes is over %d", len(job.Script), maxScriptSize)
	}
	if err := os.WriteFile(filepath.Join(sb.sc.awf, filepath.Base(isolate.ScriptPath)), job.Script, scriptMode); err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "place script: %v", err)
	}
	sb.ent.InvocationID = job.InvocationID
	if err := sb.r.track(sb.ent); err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "%v", err)
	}
	if sb.handoff != nil {
		select {
		case <-sb.done:
			st := exitStatus(sb.ps)
			o := isolate.Err(isolate.KindLaunchFailed, "the interpreter of %s ended before its script (exit %d %s)", sb.id, st.code, st.signal)
			o.Stdout, o.Stderr = sb.stdout.Bytes(), sb.stderr.Bytes()
			return o
		default:
		}
		// The bootstrap runs under every control and does nothing until
		// its script arrives; once it has the script, a short one can end
		// before a caller could look at it.
		if job.OnStart != nil {
			job.OnStart(sb.pid)
		}
	}
	// The deadline counts from here, not from Prepare: a sandbox may wait
	// in a pool for as long as it likes.
	wall := time.NewTimer(l.Wall)
	defer wall.Stop()
	timedOut := false
	kill := sb.kill
	execErr := make(chan error, 1)
	if sb.handoff != nil {
		// The interpreter is running and blocked on its descriptor: hand it
		// the script (a pipe's worth fits without waiting for it).
		go func() {
			err := isolate.HandScript(sb.handoff, job.Script)
			if cerr := sb.handoff.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("bootstrap: close the handoff: %w", cerr)
			}
			execErr <- err
		}()
	} else {
		go func() { execErr <- sb.ctr.Exec() }()
	}
	var err error
	select {
	case err = <-execErr:
	case <-wall.C:
		timedOut = true
		sb.abortStart()
		err = <-execErr
	case <-ctx.Done():
		timedOut = true
		sb.abortStart()
		err = <-execErr
	}
	started := time.Now()
	out := isolate.Outcome{ExitCode: -1}
	out.Timings.Start = started.Sub(t0)
	if err != nil && !timedOut {
		kill()
		sb.waitReaped()
		o := isolate.Err(isolate.KindLaunchFailed, "exec: %v", err)
		o.Stdout, o.Stderr = sb.stdout.Bytes(), sb.stderr.Bytes()
		o.Timings = out.Timings
		return o
	}
	if err == nil && !timedOut && job.OnStart != nil && sb.handoff == nil {
		job.OnStart(sb.pid)
	}
	if !timedOut {
		select {
		case <-sb.done:
		case <-wall.C:
			timedOut = true
			kill()
		case <-ctx.Done():
			timedOut = true
			kill()
		}
	}
	if !sb.waitReaped() {
		out.Timings.Run = time.Since(started)
		o := isolate.Err(isolate.KindCleanupFailed, "init %d not reaped %v after SIGKILL", sb.pid, killWait)
		o.Timings = out.Timings
		return o
	}
	out.Timings.Run = time.Since(started)
	t1 := time.Now()
	out = sb.verdict(out, timedOut, ctx.Err())
	out.Timings.Read = time.Since(t1)
	return out
}

// waitReaped waits, bounded, for init to be reaped after it was killed or
// exited.
func (sb *sandbox) waitReaped() bool {
	select {
	case <-sb.done:
		return true
	case <-time.After(killWait):
	}
	_ = sb.ctr.Signal(unix.SIGKILL)
	sb.r.cg.killLeaf(sb.id)
	select {
	case <-sb.done:
		return true
	case <-time.After(killWait):
		return false
	}
}

// verdict classifies a finished job.
func (sb *sandbox) verdict(out isolate.Outcome, timedOut bool, ctxErr error) isolate.Outcome {
	l := sb.t.Limits
	out.Stdout, out.Stderr = sb.stdout.Bytes(), sb.stderr.Bytes()
	status := exitStatus(sb.ps)
	out.ExitCode, out.Signal = status.code, status.signal
	c, cerr := sb.r.cg.readCounters(sb.id)
	if cerr != nil {
		// Without the counters a limit could be misreported as a plain
		// failure; fail the run rather than guess.
		return withKind(out, isolate.KindCleanupFailed, "read cgroup counters: %v", cerr)
	}
	switch {
	case timedOut && ctxErr != nil:
		return withKind(out, isolate.KindTimeout, "aborted: %v", ctxErr)
	case timedOut:
		return withKind(out, isolate.KindTimeout, "wall-clock deadline %v reached", l.Wall)
	case c.OOMKills > 0:
		return withKind(out, isolate.KindOOM, "memory limit %d bytes: %d OOM kills", l.MemoryBytes, c.OOMKills)
	case status.signo == unix.SIGSYS:
		return withKind(out, isolate.KindSeccompKill, "killed by SIGSYS: forbidden system call")
	case status.signo == unix.SIGXFSZ:
		return withKind(out, isolate.KindFileSizeLimit, "killed by SIGXFSZ: file size limit %d bytes", l.FileSizeBytes)
	}
	if status.code != 0 {
		if c.PidsMax > 0 {
			return withKind(out, isolate.KindPidsLimit, "pids limit %d refused %d forks", l.Pids, c.PidsMax)
		}
		if workspace.HitFileSize(l.FileSizeBytes, out.Stderr, sb.fileSizeDirs()...) {
			return withKind(out, isolate.KindFileSizeLimit, "a file reached the size limit %d bytes", l.FileSizeBytes)
		}
		if status.signal != "" {
			return withKind(out, isolate.KindNonzeroExit, "killed by %s", status.signal)
		}
		return withKind(out, isolate.KindNonzeroExit, "exit status %d", status.code)
	}
	outPath := isolate.OutputPath
	if sb.enc != nil {
		outPath = filepath.Join(sb.enc.Out, sb.enc.Result)
	}
	data, kind, detail := readOutput(sb.qfd, outPath, l.OutputBytes)
	if kind != isolate.KindOK {
		return withKind(out, kind, "%s", detail)
	}
	out.Kind = isolate.KindOK
	out.Output = data
	return out
}

func withKind(o isolate.Outcome, k isolate.Kind, format string, args ...any) isolate.Outcome {
	o.Kind = k
	o.Detail = fmt.Sprintf(format, args...)
	return o
}

// Destroy implements isolate.Sandbox. It is idempotent; a sandbox that
// cannot be reclaimed marks the runtime unusable.
func (sb *sandbox) Destroy(ctx context.Context) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.destroyed {
		return nil
	}
	sb.destroyed = true
	if err := sb.teardown(ctx); err != nil {
		sb.r.markBroken(err)
		return err
	}
	return nil
}

// teardown kills init, destroys the container and removes the cgroup leaf,
// the root mount, the scratch tmpfs and the journal entry.
func (sb *sandbox) teardown(ctx context.Context) error {
	var errs []error
	if sb.qfd >= 0 {
		_ = unix.Close(sb.qfd)
		sb.qfd = -1
	}
	// An idle bootstrap is killed below with the rest; its pipe is closed
	// after, so it never sees an end of file first.
	defer sb.closeHandoff()
	if sb.ctr != nil {
		if sb.pid != 0 {
			select {
			case <-sb.done:
			default:
				_ = sb.ctr.Signal(unix.SIGKILL)
				sb.r.cg.killLeaf(sb.id)
				select {
				case <-sb.done:
				case <-ctx.Done():
					errs = append(errs, fmt.Errorf("init %d of %s not reaped: %w", sb.pid, sb.id, ctx.Err()))
				}
			}
		}
		if len(errs) == 0 {
			if err := destroyContainer(ctx, sb.ctr); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := sb.r.cg.removeLeaf(ctx, sb.id); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(filepath.Join(sb.r.libct, sb.id)); err != nil {
		errs = append(errs, err)
	}
	if err := workspace.DetachAndRemove(sb.sc.root); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		close(sb.released)
		errs = append(errs, sb.r.untrack(sb.ent.Name))
		if sb.view != nil {
			// The view outlives its sandboxes; only the count of users
			// drops. A sandbox that could not be reclaimed keeps its view
			// in use, so Close leaves it for Sweep.
			sb.r.releaseView(sb.view)
			sb.view = nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("direct: destroy %s: %w", sb.id, err)
	}
	return nil
}

// destroyContainer destroys a stopped container, retrying while its cgroup
// drains, until ctx ends.
func destroyContainer(ctx context.Context, ctr *libcontainer.Container) error {
	for {
		err := ctr.Destroy()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("destroy container %s: %w", ctr.ID(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// closeHandoff closes the broker's ends of the bootstrap's pipe if Exec
// and Start have not.
func (sb *sandbox) closeHandoff() {
	// An *os.File tolerates a second Close.
	if sb.handoff != nil {
		_ = sb.handoff.Close()
	}
	if sb.bootRead != nil {
		_ = sb.bootRead.Close()
	}
}
