package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/workspace"

	"github.com/awf-project/awf/isolate/ownthread"
)

// killGrace bounds how long Exec waits for runsc after killing it.
const killGrace = 5 * time.Second

// sandbox is one prepared gVisor sandbox.
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

	mu         sync.Mutex
	used       bool
	cmd        *exec.Cmd
	done       <-chan error // cmd's Wait result, from ownthread.Start
	container  string
	exited     bool
	destroyed  bool
	destroyErr error
}

// Exec runs job once under runsc and returns its typed outcome.
func (s *sandbox) Exec(ctx context.Context, job isolate.Job) isolate.Outcome {
	s.mu.Lock()
	if s.used || s.destroyed {
		s.mu.Unlock()
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: sandbox already used")
	}
	s.used = true
	s.mu.Unlock()

	t0 := time.Now()
	cmd, stdout, stderr, err := s.launch(job)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "gvisor: %v", err)
	}
	started := time.Now()
	o := s.wait(ctx, cmd)
	o.Timings.Start = started.Sub(t0)
	o.Timings.Run = time.Since(started)
	o.Stdout, o.Stderr = stdout.Bytes(), stderr.Bytes()
	if s.enc != nil {
		return s.concludeEnclave(o)
	}
	return s.ws.Conclude(o, s.t, "gvisor", "the Sentry's RLIMIT_NPROC")
}

// launch writes the script and the bundle and starts `runsc run`.
func (s *sandbox) launch(job isolate.Job) (*exec.Cmd, *workspace.Capture, *workspace.Capture, error) {
	invID := job.InvocationID
	if invID == "" {
		invID = "sandbox-" + s.ws.Journal.SandboxID
	}
	if err := workspace.ValidID("invocation", invID); err != nil {
		return nil, nil, nil, err
	}
	argv := job.Argv
	if len(argv) == 0 {
		argv = isolate.DefaultArgv
	}
	s.container = "awf-" + s.name
	s.ws.Journal.InvocationID = invID
	s.ws.Journal.Container = s.container
	if err := s.ws.WriteJournal(); err != nil {
		return nil, nil, nil, err
	}
	if err := s.ws.WriteScript(job.Script); err != nil {
		return nil, nil, nil, err
	}
	bundle := s.ws.Path("bundle")
	dt := s.t
	if dt.Policy == nil {
		// Only the probe's trial has no policy: it brings its own filter
		// in s.seccomp, so the description names none.
		dt.Weaken.NoSeccomp = true
	}
	desc, err := isolate.Describe(dt, isolate.Job{Argv: argv}, isolate.HostConfig{SandboxCPUs: s.r.cpus})
	if err != nil {
		return nil, nil, nil, err
	}
	spec, err := buildSpec(bundleSpec{
		desc: desc, rootFS: s.rootFS, ws: s.ws,
		cgroup: s.cg.rel, seccomp: s.seccomp, runID: s.runID, invID: invID, sandbox: s.ws.Journal.SandboxID,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if s.enc != nil {
		if err := renderEnclave(*s.enc, s.ws, spec); err != nil {
			return nil, nil, nil, err
		}
	}
	if err := writeBundle(bundle, spec); err != nil {
		return nil, nil, nil, err
	}
	stateRoot := s.ws.Path("runsc")
	if err := os.Mkdir(stateRoot, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("runsc state root: %w", err)
	}
	args := withNetwork(globalArgs(stateRoot, s.ws.Path("runsc.log"), s.platform, s.seccomp != nil, s.t.Weaken.NoNetNS), s.t)
	args = append(args, s.r.debugArgs...)
	args = append(args, "run", "--bundle="+bundle, s.container)
	cmd := networkCommand(s.r.runsc, args, s.t)
	cmd.Dir = s.ws.Dir
	cmd.Env = runscEnv
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
		return nil, nil, nil, s.r.runscErr
	}
	// From a thread of its own: the parent-death signal follows the forking
	// thread, which must outlive runsc (see isolate/ownthread).
	done, err := ownthread.Start(cmd)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start runsc: %w", err)
	}
	s.cmd, s.done = cmd, done
	return cmd, stdout, stderr, nil
}

// wait waits for runsc to exit or for the wall-clock deadline, which kills
// the container, and classifies the result.
func (s *sandbox) wait(ctx context.Context, cmd *exec.Cmd) isolate.Outcome {
	s.mu.Lock()
	reaped := s.done
	s.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		err := <-reaped
		s.mu.Lock()
		s.exited = true
		s.mu.Unlock()
		done <- err
	}()
	dl := time.NewTimer(s.t.Limits.Wall)
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
	s.mu.Lock()
	if s.destroyed {
		err := s.destroyErr
		s.mu.Unlock()
		return err
	}
	s.destroyed = true
	cmd, running := s.cmd, s.cmd != nil && !s.exited
	s.mu.Unlock()

	var errs []error
	if running {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
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
	err := s.r.books.Destroyed(s.name, errors.Join(errs...))
	s.mu.Lock()
	s.destroyErr = err
	s.mu.Unlock()
	return err
}
