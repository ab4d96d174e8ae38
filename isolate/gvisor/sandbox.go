package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/trial"
	"github.com/awf-project/awf/isolate/workspace"

	"github.com/awf-project/awf/isolate/ownthread"
)

// killGrace bounds how long Exec waits for runsc after killing it.
const killGrace = 5 * time.Second

// sandbox is one prepared gVisor sandbox.
//
// A sandbox that Prepare returns is booted: `runsc run` already runs the
// interpreter's bootstrap (isolate.BootstrapArgv), which has loaded its
// modules and waits for the script on its standard input, so Exec only
// places the script and hands it over. A sandbox for any other argv (the
// probe, an enclave, a job with its own argv) is started cold by Exec.
type sandbox struct {
	r        *Runtime
	t        isolate.Template
	seccomp  *specs.LinuxSeccomp
	runID    string
	name     string
	platform string
	rootFS   string
	ws       *workspace.Workspace
	cg       *cgroup
	// enc is an enclave's layout (RunEnclave), nil for a query.
	enc *enclave.Layout

	// booted is set once the bootstrap waits for its script on the pipe
	// whose write end is script.
	booted bool
	script *os.File

	life           isolate.SingleUse
	mu             sync.Mutex
	cmd            *exec.Cmd
	stdout, stderr *workspace.Capture
	exitc          chan struct{} // closed once runsc has been reaped
	waitErr        error         // runsc's Wait result, set before exitc closes
	container      string
	exited         bool
}

// Exec runs job once under runsc and returns its typed outcome. The
// wall-clock limit counts from here.
func (s *sandbox) Exec(ctx context.Context, job isolate.Job) isolate.Outcome {
	t0 := time.Now()
	if !s.life.Use() {
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: sandbox already used")
	}
	argv := job.Argv
	if len(argv) == 0 {
		argv = isolate.DefaultArgv()
	}
	switch {
	case !s.booted:
		return s.execCold(ctx, t0, job, argv)
	case !isolate.IsDefaultArgv(argv):
		return s.execOther(ctx, t0, job, argv)
	}
	if err := s.handOver(ctx, job, t0); err != nil {
		return handOverFailed(err)
	}
	return s.finish(ctx, t0)
}

// execCold starts runsc for job now, in a sandbox that was not booted. A
// default-argv job still runs through the bootstrap, booted here.
func (s *sandbox) execCold(ctx context.Context, t0 time.Time, job isolate.Job, argv []string) isolate.Outcome {
	if s.enc == nil && isolate.IsDefaultArgv(argv) {
		// The script goes into the pipe at once: the bootstrap reads it
		// once its modules are loaded.
		if err := s.boot(ctx, false); err != nil {
			return isolate.Err(isolate.KindLaunchFailed, "%v", err)
		}
		if err := s.handOver(ctx, job, t0); err != nil {
			return handOverFailed(err)
		}
		return s.finish(ctx, t0)
	}
	invID, err := s.invocation(job)
	if err == nil {
		err = s.ws.WriteScript(job.Script)
	}
	if err == nil {
		err = s.start(argv, invID, nil)
	}
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: %v", err)
	}
	return s.finish(ctx, t0)
}

// execOther runs a job whose argv is not the bootstrap's: the argv is
// fixed when runsc starts, so it destroys this sandbox and runs the job
// cold in a fresh one from the same template.
func (s *sandbox) execOther(ctx context.Context, t0 time.Time, job isolate.Job, argv []string) isolate.Outcome {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	err := s.Destroy(dctx)
	cancel()
	if err != nil {
		return isolate.Err(isolate.KindCleanupFailed, "gvisor: replace prepared sandbox: %v", err)
	}
	other, err := s.r.prepareTemplate(ctx, s.t)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: prepare for argv: %v", err)
	}
	other.life.Use() // fresh: the job below is its one use
	out := other.execCold(ctx, t0, job, argv)
	dctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := other.Destroy(dctx); err != nil {
		return isolate.Outcome{Kind: isolate.KindCleanupFailed, ExitCode: out.ExitCode, Detail: fmt.Sprintf("gvisor: destroy after %s: %v", out.Kind, err), Timings: out.Timings}
	}
	return out
}

// handOver places the script read-only at isolate.ScriptPath, records the
// invocation and hands the same bytes to the waiting bootstrap, within the
// wall-clock deadline that started at t0.
func (s *sandbox) handOver(ctx context.Context, job isolate.Job, t0 time.Time) error {
	select {
	case <-s.exitc:
		return fmt.Errorf("the prepared sandbox exited before its job: %s", s.exitReason())
	default:
	}
	if _, err := s.invocation(job); err != nil {
		return err
	}
	if err := s.ws.WriteScript(job.Script); err != nil {
		return err
	}
	// The write waits only while a script larger than the pipe meets a
	// bootstrap that has not read yet (a cold run's, still booting).
	dl := t0.Add(s.t.Limits.Wall)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = s.script.SetWriteDeadline(dl)
	werr := isolate.HandScript(s.script, job.Script)
	cerr := s.script.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("%w: %s", err, s.exitReason())
	}
	return nil
}

// handOverFailed is the outcome of a hand-over that failed: a timeout when
// the deadline ended it, else a launch failure.
func handOverFailed(err error) isolate.Outcome {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return isolate.Err(isolate.KindTimeout, "gvisor: the deadline passed before the bootstrap took its script: %v", err)
	}
	return isolate.Err(isolate.KindLaunchFailed, "gvisor: %v", err)
}

// exitReason says what runsc logged, for a launch that failed.
func (s *sandbox) exitReason() string {
	if msg := runscLogError(s.ws.Path("runsc.log")); msg != "" {
		return msg
	}
	return strings.TrimSpace(string(s.stderr.Bytes()))
}

// invocation checks job's invocation id and records it in the journal.
func (s *sandbox) invocation(job isolate.Job) (string, error) {
	return s.ws.RecordInvocation(job.InvocationID)
}

// finish waits for the job under the deadline that started at t0 and
// concludes its outcome.
func (s *sandbox) finish(ctx context.Context, t0 time.Time) isolate.Outcome {
	started := time.Now()
	o := s.wait(ctx, t0)
	o.Timings.Start = started.Sub(t0)
	o.Timings.Run = time.Since(started)
	o.Stdout, o.Stderr = s.stdout.Bytes(), s.stderr.Bytes()
	// The Sentry enforces the pids limit as RLIMIT_NPROC (bundle.go).
	out := isolate.OutputPath
	if s.enc != nil {
		out = filepath.Join(s.enc.Out, s.enc.Result)
	}
	return s.ws.ConcludeFrom(o, s.t, "gvisor", "the Sentry's RLIMIT_NPROC", out)
}

// boot starts the sandbox for a default-argv job (isolate.IsDefaultArgv):
// runsc runs the bootstrap, which waits on a pipe for the script. With
// wait, boot returns once it waits (see waitReady), so that nothing of a
// prepared sandbox still runs when Prepare returns.
func (s *sandbox) boot(ctx context.Context, wait bool) error {
	rd, wr, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("gvisor: script pipe: %w", err)
	}
	st, err := rd.Stat()
	if err != nil {
		rd.Close()
		wr.Close()
		return fmt.Errorf("gvisor: script pipe: %w", err)
	}
	s.script = wr
	// runsc passes the job only its stdio, so the bootstrap reads fd 0.
	err = s.start(isolate.BootstrapArgv(0), "sandbox-"+s.ws.Journal.SandboxID, rd)
	rd.Close()
	if err == nil && wait {
		err = s.waitReady(ctx, st.Sys().(*syscall.Stat_t).Ino)
	}
	if err != nil {
		return fmt.Errorf("gvisor: boot: %w", err)
	}
	s.booted = true
	return nil
}

// start writes the bundle for argv and starts `runsc run`, with stdin as
// the job's standard input (nil: an empty pipe). invID labels the container.
func (s *sandbox) start(argv []string, invID string, stdin *os.File) error {
	s.container = "awf-" + s.name
	s.ws.Journal.Container = s.container
	if err := s.ws.WriteJournal(); err != nil {
		return err
	}
	bundle := s.ws.Path("bundle")
	// The filter is s.seccomp, translated by Prepare (or the trial's own).
	desc, err := trial.Describe(s.t, argv, s.r.cpus)
	if err != nil {
		return err
	}
	spec, err := buildSpec(bundleSpec{
		desc: desc, rootFS: s.rootFS, ws: s.ws,
		cgroup: s.cg.rel, seccomp: s.seccomp, runID: s.runID, invID: invID, sandbox: s.ws.Journal.SandboxID,
	})
	if err != nil {
		return err
	}
	if s.enc != nil {
		if err := renderEnclave(*s.enc, s.ws, spec); err != nil {
			return err
		}
	}
	if s.r.testOnlySharedBinds {
		dropMountHints(spec.Annotations)
	}
	if err := writeBundle(bundle, spec); err != nil {
		return err
	}
	stateRoot := s.ws.Path("runsc")
	if err := os.Mkdir(stateRoot, 0o700); err != nil {
		return fmt.Errorf("runsc state root: %w", err)
	}
	args := withNetwork(globalArgs(stateRoot, s.ws.Path("runsc.log"), s.platform, s.seccomp != nil, s.t.Weaken.NoNetNS), s.t)
	args = append(args, s.r.debugArgs...)
	args = append(args, "run", "--bundle="+bundle, s.container)
	cmd := networkCommand(s.r.runsc, args, s.t)
	cmd.Dir = s.ws.Dir
	cmd.Env = runscEnv
	if stdin == nil {
		// Not the host's /dev/null: runsc fchowns its stdio to the
		// sandbox user, which made /dev/null 65534's and set its ctime
		// to the moment the sandbox started, which any agent can stat.
		// An empty pipe reads as EOF the same way and is the sandbox's own.
		rd, wr, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
		wr.Close()
		defer rd.Close()
		stdin = rd
	}
	cmd.Stdin = stdin
	stdout := &workspace.Capture{Max: s.t.Limits.CaptureBytes}
	stderr := &workspace.Capture{Max: s.t.Limits.CaptureBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that a kill reaches runsc and everything it
	// started; if the broker dies, runsc dies, and the sandbox and gofer
	// follow (runsc gives them PDEATHSIG).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = killGrace
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r.runsc == "" {
		return s.r.runscErr
	}
	// From a thread of its own: the parent-death signal follows the forking
	// thread, which must outlive runsc (see isolate/ownthread).
	done, err := ownthread.Start(cmd)
	if err != nil {
		return fmt.Errorf("start runsc: %w", err)
	}
	s.cmd, s.stdout, s.stderr = cmd, stdout, stderr
	exitc := make(chan struct{})
	s.exitc = exitc
	go func() {
		err := <-done
		s.mu.Lock()
		s.exited, s.waitErr = true, err
		s.mu.Unlock()
		close(exitc)
	}()
	return nil
}

// wait waits for runsc to exit or for the wall-clock deadline, counted
// from t0, which kills the container, and classifies the result.
func (s *sandbox) wait(ctx context.Context, t0 time.Time) isolate.Outcome {
	s.mu.Lock()
	exitc := s.exitc
	s.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		<-exitc
		s.mu.Lock()
		err := s.waitErr
		s.mu.Unlock()
		done <- err
	}()
	dl := time.NewTimer(s.t.Limits.Wall - time.Since(t0))
	defer dl.Stop()
	var err error
	var timedOut bool
	var why string
	select {
	case err = <-done:
	case <-dl.C:
		timedOut, why = true, fmt.Sprintf("wall-clock limit %v reached", s.t.Limits.Wall)
	case <-ctx.Done():
		timedOut, why = true, fmt.Sprintf("caller deadline: %v", ctx.Err())
	}
	if timedOut {
		s.kill(ctx)
		select {
		case <-done:
		case <-time.After(killGrace + time.Second):
			return isolate.Err(isolate.KindTimeout, "gvisor: %s; runsc did not exit after kill", why)
		}
		o := isolate.Err(isolate.KindTimeout, "gvisor: %s; killed", why)
		o.Signal = "SIGKILL"
		return o
	}
	return s.classify(err)
}

// kill stops the container and runsc. runsc kill reaches the job inside the
// Sentry; killing the runsc process group takes the sandbox and gofer down.
func (s *sandbox) kill(ctx context.Context) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	_, _ = runscCommand(kctx, s.r.runsc, 2*time.Second, "--root="+s.ws.Path("runsc"), "kill", "--all", s.container, "KILL")
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// classify maps runsc's exit to an outcome. The cgroup counters come first:
// a job that hit the memory or pids limit takes the Sentry down with it.
func (s *sandbox) classify(waitErr error) isolate.Outcome {
	oom, pids := s.cg.events()
	code := 0
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			code = 128 + int(st.Signal())
		} else {
			code = ee.ExitCode()
		}
	default:
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: wait for runsc: %v", waitErr)
	}
	switch {
	case oom:
		o := isolate.Err(isolate.KindOOM, "gvisor: memory limit %d bytes reached (cgroup OOM kill)", s.t.Limits.MemoryBytes)
		o.Signal = "SIGKILL"
		return o
	case pids:
		return isolate.Err(isolate.KindPidsLimit, "gvisor: pids limit reached (%d job tasks plus %d for the sandbox)", s.t.Limits.Pids, sentryTasks)
	}
	if msg := runscLogError(s.ws.Path("runsc.log")); msg != "" {
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: runsc failed (exit %d): %s", code, msg)
	}
	return workspace.ExitOutcome("gvisor", code)
}

// Destroy kills whatever runs and removes the container state, the cgroup
// and the workspace. It is idempotent. A failure marks the runtime unusable.
func (s *sandbox) Destroy(ctx context.Context) error {
	return s.life.Destroy(func() error { return s.teardown(ctx) })
}

// teardown is Destroy's one run.
func (s *sandbox) teardown(ctx context.Context) error {
	s.mu.Lock()
	cmd, running := s.cmd, s.cmd != nil && !s.exited
	s.mu.Unlock()

	var errs []error
	if running {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if s.script != nil {
		// A sandbox destroyed unused never gets a script: the launcher
		// is killed with its sandbox before it could read an EOF.
		_ = s.script.Close()
	}
	if s.ws != nil {
		if err := reclaimContainer(ctx, s.r.runsc, s.ws.Path("runsc"), s.container); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cg != nil {
		if err := s.cg.remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ws != nil {
		if err := workspace.Remove(ctx, s.ws.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return s.r.books.Destroyed(s.name, errors.Join(errs...))
}
