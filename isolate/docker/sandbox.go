package docker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/trial"
	"github.com/awf-project/awf/isolate/workspace"
)

// Deadlines of Engine calls that must not hang.
const (
	callTimeout = 30 * time.Second
	killTimeout = 10 * time.Second
)

// sandbox is one prepared Docker sandbox. Prepare creates its container,
// stopped, for the argv it expects (isolate.DefaultArgv; Run's job's own,
// the trial's program), so that a sandbox a pool holds costs its job only
// the script, the start and the wait.
type sandbox struct {
	r       *Runtime
	t       isolate.Template
	runID   string
	name    string
	image   string
	seccomp string
	ws      *workspace.Workspace

	// root is the sandbox's own mount of the rootfs ("" for the probe), and
	// rootDirs its top-level directories bound over the image's.
	root     string
	rootDirs []string
	// tmp is the host tmpfs bound at /tmp, mounted by Prepare.
	tmp string

	life isolate.SingleUse

	// id, argv, desc and body are the created container (its id, the
	// command it runs, the description and the create request it was made
	// from), set by Prepare and, for another argv, by Exec; only Exec
	// reads them.
	id   string
	argv []string
	desc *specs.Spec
	body createBody

	mu sync.Mutex
	// sent says that a create request left for the Engine; unanswered,
	// that its reply never came, so the Engine may still add the
	// container after the call gave up (Destroy waits that out). Guarded
	// by mu: Destroy may run beside Exec.
	sent, unanswered bool
}

// containerState is the part of the container inspect reply the backend reads.
type containerState struct {
	State struct {
		Running   bool   `json:"Running"`
		OOMKilled bool   `json:"OOMKilled"`
		ExitCode  int    `json:"ExitCode"`
		Pid       int    `json:"Pid"`
		Error     string `json:"Error"`
	} `json:"State"`
}

// Exec runs the job in the sandbox's container and returns its typed
// outcome. The container was created by Prepare for isolate.DefaultArgv
// (by Run and the trial for their job's argv); a job with another argv
// replaces it with one created for that argv first, so a container always
// runs the command it was created with. Then, in either case and in this order, Exec
// records the invocation, writes and seals the script (the directory the
// container binds at /awf, so the file is there when the container
// starts), checks the flags of every bind, starts the container and waits.
func (s *sandbox) Exec(ctx context.Context, job isolate.Job) isolate.Outcome {
	if !s.life.Use() {
		return isolate.Err(isolate.KindLaunchFailed, "docker: sandbox already used")
	}

	t0 := time.Now()
	out, err := s.launch(ctx, job)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "docker: %v", err)
	}
	started := time.Now()
	if job.OnStart != nil {
		if st, err := s.inspect(ctx); err == nil && st.State.Pid > 0 {
			job.OnStart(st.State.Pid)
		}
	}
	o := s.wait(ctx)
	o.Timings.Start = started.Sub(t0)
	o.Timings.Run = time.Since(started)
	o.Stdout, o.Stderr = out.collect()
	return s.ws.Conclude(o, s.t, "docker", "the pids limit")
}

// launch does Exec's steps up to and including the start, and returns
// the container's output as it is read from its attach stream.
func (s *sandbox) launch(ctx context.Context, job isolate.Job) (*output, error) {
	argv := job.Argv
	if len(argv) == 0 {
		argv = isolate.DefaultArgv()
	}
	if !slices.Equal(argv, s.argv) {
		if err := s.r.removeContainer(ctx, s.ws.Journal.Container); err != nil {
			return nil, err
		}
		if err := s.create(ctx, argv); err != nil {
			return nil, err
		}
	}
	if _, err := s.ws.RecordInvocation(job.InvocationID); err != nil {
		return nil, err
	}
	if err := s.ws.WriteScript(job.Script); err != nil {
		return nil, err
	}
	// The binds take their flags from their host mounts when the container
	// starts, so they are checked now, the script directory sealed.
	if err := checkBindFlags(s.desc, s.body); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// Attached before the start, so that no output is lost.
	out, err := s.attach(cctx)
	if err != nil {
		return nil, err
	}
	if err := s.r.eng.call(cctx, http.MethodPost, "/containers/"+s.id+"/start", nil, nil, nil); err != nil {
		out.collect()
		return nil, fmt.Errorf("start: %w", err)
	}
	return out, nil
}

// create creates the sandbox's labelled container, stopped, to run argv.
// The labels are what Sweep reads: the run, the sandbox, the state dir
// and the backend. The invocation, unknown until Exec, is in the
// workspace's journal only.
func (s *sandbox) create(ctx context.Context, argv []string) error {
	// The filter is s.seccomp, rendered by Prepare (or the trial's own).
	desc, err := trial.Describe(s.t, argv, s.r.cpus)
	if err != nil {
		return err
	}
	body, err := buildCreate(containerSpec{
		desc: desc, image: s.image, seccomp: s.seccomp, ws: s.ws, tmp: s.tmp,
		root: s.root, rootDirs: s.rootDirs,
		labels: map[string]string{
			labelRun: s.runID, labelSandbox: s.ws.Journal.SandboxID,
			labelState: s.r.stateTag, labelBackend: Name,
		},
	})
	if err != nil {
		return err
	}
	var reply struct {
		ID       string   `json:"Id"`
		Warnings []string `json:"Warnings"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	q := url.Values{"name": {s.ws.Journal.Container}}
	s.mu.Lock()
	s.sent, s.unanswered = true, true
	s.mu.Unlock()
	err = s.r.eng.call(cctx, http.MethodPost, "/containers/create", q, body, &reply)
	var ae *apiError
	if err == nil || errors.As(err, &ae) {
		// The Engine answered: it made the container or refused it.
		s.mu.Lock()
		s.unanswered = false
		s.mu.Unlock()
	}
	if err != nil {
		if isNotFound(err) {
			// The image went away: verify or import it again next time.
			s.r.forgetImage(s.image)
		}
		return fmt.Errorf("create: %w", err)
	}
	s.id, s.argv, s.desc, s.body = reply.ID, slices.Clone(argv), desc, body
	if len(reply.Warnings) > 0 {
		// A warning means the Engine dropped a setting, such as a limit the
		// kernel cannot enforce: fail closed.
		return fmt.Errorf("create: the Engine dropped controls: %v", reply.Warnings)
	}
	return s.checkKept(ctx, body)
}

// checkKept fails closed unless the created container masks every path
// asked for and keeps no log: an Engine that predates
// HostConfig.MaskedPaths ignores the field without a warning and applies
// its own, shorter list, and a log would put the script's output on the
// Engine's data root (see buildCreate).
func (s *sandbox) checkKept(ctx context.Context, want createBody) error {
	var got struct {
		HostConfig struct {
			MaskedPaths []string  `json:"MaskedPaths"`
			LogConfig   logConfig `json:"LogConfig"`
		} `json:"HostConfig"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := s.r.eng.call(cctx, http.MethodGet, "/containers/"+s.id+"/json", nil, nil, &got); err != nil {
		return fmt.Errorf("create: inspect the container's controls: %w", err)
	}
	for _, p := range want.HostConfig.MaskedPaths {
		if !slices.Contains(got.HostConfig.MaskedPaths, p) {
			return fmt.Errorf("create: the Engine did not keep masked path %s", p)
		}
	}
	if got.HostConfig.LogConfig.Type != want.HostConfig.LogConfig.Type {
		return fmt.Errorf("create: the Engine logs the container with %q, not %q: the script's output would be written to its data root", got.HostConfig.LogConfig.Type, want.HostConfig.LogConfig.Type)
	}
	return nil
}

// wait waits for the container to stop or for the wall-clock deadline,
// which kills it, and classifies the result.
func (s *sandbox) wait(ctx context.Context) isolate.Outcome {
	wctx, cancel := context.WithTimeout(ctx, s.t.Limits.Wall)
	defer cancel()
	var reply struct {
		StatusCode int `json:"StatusCode"`
	}
	err := s.r.eng.call(wctx, http.MethodPost, "/containers/"+s.id+"/wait", url.Values{"condition": {"not-running"}}, nil, &reply)
	if err != nil && wctx.Err() != nil {
		why := fmt.Sprintf("wall-clock limit %v reached", s.t.Limits.Wall)
		if ctx.Err() != nil {
			why = fmt.Sprintf("caller deadline: %v", ctx.Err())
		}
		if kerr := s.kill(ctx); kerr != nil {
			return isolate.Err(isolate.KindTimeout, "docker: %s; kill failed: %v", why, kerr)
		}
		o := isolate.Err(isolate.KindTimeout, "docker: %s; killed", why)
		o.Signal = "SIGKILL"
		return o
	}
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "docker: wait: %v", err)
	}
	st, err := s.inspect(ctx)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "docker: inspect: %v", err)
	}
	return s.classify(st)
}

// kill sends SIGKILL and waits, bounded, until the container has stopped.
func (s *sandbox) kill(ctx context.Context) error {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	err := s.r.eng.call(kctx, http.MethodPost, "/containers/"+s.id+"/kill", url.Values{"signal": {"KILL"}}, nil, nil)
	var ae *apiError
	if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusConflict) { // 409: not running
		return err
	}
	return s.r.eng.call(kctx, http.MethodPost, "/containers/"+s.id+"/wait", url.Values{"condition": {"not-running"}}, nil, nil)
}

func (s *sandbox) inspect(ctx context.Context) (containerState, error) {
	var st containerState
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := s.r.eng.call(cctx, http.MethodGet, "/containers/"+s.id+"/json", nil, nil, &st)
	return st, err
}

// classify maps the stopped container's state to an outcome.
func (s *sandbox) classify(st containerState) isolate.Outcome {
	code := st.State.ExitCode
	if st.State.OOMKilled {
		o := isolate.Err(isolate.KindOOM, "docker: memory limit %d bytes reached (OOM kill)", s.t.Limits.MemoryBytes)
		o.Signal = "SIGKILL"
		return o
	}
	if st.State.Error != "" {
		return isolate.Err(isolate.KindLaunchFailed, "docker: %s", st.State.Error)
	}
	return workspace.ExitOutcome("docker", code)
}

// output is a started container's stdout and stderr, each capped at
// CaptureBytes, read from the Engine's attach stream while it runs. The
// container keeps no log (see buildCreate), so this stream is the only copy
// of the output, and it never touches a disk.
type output struct {
	stdout, stderr *workspace.Capture
	body           io.Closer // nil: nothing attached
	done           chan struct{}
}

// drainGrace bounds how long collect waits, once the container has
// stopped, for the Engine to end the attach stream.
const drainGrace = 5 * time.Second

// attach opens the attach stream of the created container, which the
// Engine ends when the container stops, and reads it until then. All of
// it is read, what is beyond the caps discarded, because an unread stream
// would stall the script's writes. With CaptureBytes 0 nothing is
// attached and the Engine drops the output.
func (s *sandbox) attach(ctx context.Context) (*output, error) {
	capb := s.t.Limits.CaptureBytes
	out := &output{stdout: &workspace.Capture{Max: capb}, stderr: &workspace.Capture{Max: capb}, done: make(chan struct{})}
	if capb == 0 {
		close(out.done)
		return out, nil
	}
	body, err := s.r.eng.attach(ctx, s.id)
	if err != nil {
		return nil, err
	}
	out.body = body
	go func() {
		defer close(out.done)
		demux(body, out.stdout, out.stderr)
	}()
	return out, nil
}

// collect returns what was captured once the stream has ended, or after
// drainGrace, when it closes the stream itself. Failures leave the
// captures short: they are for the audit log only.
func (o *output) collect() ([]byte, []byte) {
	if o.body != nil {
		select {
		case <-o.done:
		case <-time.After(drainGrace):
		}
		_ = o.body.Close()
		<-o.done
	}
	return o.stdout.Bytes(), o.stderr.Bytes()
}

// demux splits the Engine's multiplexed output stream: frames of an 8-byte
// header (stream, 0, 0, 0, big-endian length) and a payload.
func demux(r io.Reader, stdout, stderr io.Writer) {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer = io.Discard
		switch hdr[0] {
		case 1:
			w = stdout
		case 2:
			w = stderr
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return
		}
	}
}

// Destroy force-removes the container and removes the workspace. It is
// idempotent. A failure marks the runtime unusable.
func (s *sandbox) Destroy(ctx context.Context) error {
	return s.life.Destroy(func() error {
		var errs []error
		if err := s.removeOwn(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := workspace.Remove(ctx, s.ws.Dir); err != nil {
			errs = append(errs, err)
		}
		return s.r.books.Destroyed(s.name, errors.Join(errs...))
	})
}

// removeOwn removes the sandbox's container, by its journalled name. A
// create whose reply never came (its call gave up: the caller's context
// ended, as in a pool fill cut short) may still be finished by the
// Engine, so while the Engine does not know the name, removeOwn looks
// again for createSettle, as Sweep does for a dead run's journals.
func (s *sandbox) removeOwn(ctx context.Context) error {
	s.mu.Lock()
	sent, unanswered := s.sent, s.unanswered
	s.mu.Unlock()
	name := s.ws.Journal.Container
	if !sent {
		return nil
	}
	if !unanswered {
		return s.r.removeContainer(ctx, name)
	}
	deadline := time.Now().Add(createSettle)
	for {
		gone, err := s.r.removeNamed(ctx, name)
		if err != nil || !gone || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove container %s: a create may still be under way: %w", name, ctx.Err())
		case <-time.After(createPoll):
		}
	}
}

// removeContainer force-removes a container by name or id; a missing one is
// already gone.
func (r *Runtime) removeContainer(ctx context.Context, ref string) error {
	if ref == "" {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	for {
		err := r.eng.call(cctx, http.MethodDelete, "/containers/"+url.PathEscape(ref), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
		if err == nil || isNotFound(err) {
			return nil
		}
		// A removal someone else asked for (a broker killed in its
		// teardown) is still under way: it is done once the Engine no
		// longer knows the container.
		if !removalInProgress(err) {
			return fmt.Errorf("remove container %s: %w", ref, err)
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("remove container %s: %w", ref, errors.Join(err, cctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
