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

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/trial"
	"github.com/awf-project/awf/isolate/workspace"
)

// Deadlines of Engine calls that must not hang.
const (
	callTimeout = 30 * time.Second
	killTimeout = 10 * time.Second
)

// sandbox is one prepared Docker sandbox.
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

	life isolate.SingleUse
	mu   sync.Mutex
	id   string // container id once created
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

// Exec creates, starts and waits for the job's container and returns its
// typed outcome.
func (s *sandbox) Exec(ctx context.Context, job isolate.Job) isolate.Outcome {
	if !s.life.Use() {
		return isolate.Err(isolate.KindLaunchFailed, "docker: sandbox already used")
	}

	t0 := time.Now()
	if err := s.create(ctx, job); err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "docker: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := s.r.eng.call(cctx, http.MethodPost, "/containers/"+s.id+"/start", nil, nil, nil)
	cancel()
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "docker: start: %v", err)
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
	o.Stdout, o.Stderr = s.logs(ctx)
	return s.ws.Conclude(o, s.t, "docker", "the pids limit")
}

// create writes the script and creates the labelled container.
func (s *sandbox) create(ctx context.Context, job isolate.Job) error {
	invID, err := s.ws.RecordInvocation(job.InvocationID)
	if err != nil {
		return err
	}
	if err := s.ws.WriteScript(job.Script); err != nil {
		return err
	}
	// The filter is s.seccomp, rendered by Prepare (or the trial's own).
	desc, err := trial.Describe(s.t, job.Argv, s.r.cpus)
	if err != nil {
		return err
	}
	tmp, err := s.ws.MountScratch("tmp", s.t.Limits.TmpTmpfsBytes)
	if err != nil {
		return err
	}
	body, err := buildCreate(containerSpec{
		desc: desc, image: s.image, seccomp: s.seccomp, ws: s.ws, tmp: tmp, logMax: 2*s.t.Limits.CaptureBytes + 4096,
		root: s.root, rootDirs: s.rootDirs,
		labels: map[string]string{
			labelRun: s.runID, labelInvocation: invID, labelSandbox: s.ws.Journal.SandboxID,
			labelState: s.r.stateTag, labelBackend: Name,
		},
	})
	if err != nil {
		return err
	}
	if err := checkBindFlags(desc, body); err != nil {
		return err
	}
	var reply struct {
		ID       string   `json:"Id"`
		Warnings []string `json:"Warnings"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	q := url.Values{"name": {s.ws.Journal.Container}}
	if err := s.r.eng.call(cctx, http.MethodPost, "/containers/create", q, body, &reply); err != nil {
		if isNotFound(err) {
			// The image went away: verify or import it again next time.
			s.r.forgetImage(s.image)
		}
		return fmt.Errorf("create: %w", err)
	}
	s.mu.Lock()
	s.id = reply.ID
	s.mu.Unlock()
	if len(reply.Warnings) > 0 {
		// A warning means the Engine dropped a setting, such as a limit the
		// kernel cannot enforce: fail closed.
		return fmt.Errorf("create: the Engine dropped controls: %v", reply.Warnings)
	}
	return s.checkMasks(ctx, body.HostConfig.MaskedPaths)
}

// checkMasks fails closed unless the created container masks every path
// asked for: an Engine that predates HostConfig.MaskedPaths ignores the
// field without a warning and applies its own, shorter list.
func (s *sandbox) checkMasks(ctx context.Context, want []string) error {
	var got struct {
		HostConfig struct {
			MaskedPaths []string `json:"MaskedPaths"`
		} `json:"HostConfig"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := s.r.eng.call(cctx, http.MethodGet, "/containers/"+s.id+"/json", nil, nil, &got); err != nil {
		return fmt.Errorf("create: inspect masked paths: %w", err)
	}
	for _, p := range want {
		if !slices.Contains(got.HostConfig.MaskedPaths, p) {
			return fmt.Errorf("create: the Engine did not keep masked path %s", p)
		}
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

// logs reads the container's stdout and stderr back from its size-capped
// log, each capped at CaptureBytes. Failures leave them empty: they are for
// the audit log only.
func (s *sandbox) logs(ctx context.Context) ([]byte, []byte) {
	cap := s.t.Limits.CaptureBytes
	stdout, stderr := &workspace.Capture{Max: cap}, &workspace.Capture{Max: cap}
	if cap == 0 {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := s.r.eng.request(cctx, http.MethodGet, "/containers/"+s.id+"/logs", url.Values{"stdout": {"1"}, "stderr": {"1"}}, nil, "")
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	demux(io.LimitReader(resp.Body, 4*cap+(64<<10)), stdout, stderr)
	return stdout.Bytes(), stderr.Bytes()
}

// demux splits the Engine's multiplexed log stream: frames of an 8-byte
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
		if err := s.r.removeContainer(ctx, s.ws.Journal.Container); err != nil {
			errs = append(errs, err)
		}
		if err := workspace.Remove(ctx, s.ws.Dir); err != nil {
			errs = append(errs, err)
		}
		return s.r.books.Destroyed(s.name, errors.Join(errs...))
	})
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
