package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/isolate/sbx"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/rootfs"
	"github.com/awf-project/awf/staging"
)

// Where the primary agent runs, for telemetry (Spec.PrimaryBackend).
const (
	// PrimaryHost is an agent awf run starts as a host process in its own
	// namespaces and cgroup (verify.AgentRuntimes' "host").
	PrimaryHost = "host"
	// PrimaryExternal is an agent the operator starts outside awf, beside
	// awf broker: awf cannot say what runs it.
	PrimaryExternal = "external"
)

// primaryBackend returns s's primary backend.
func primaryBackend(s Spec) string {
	if s.PrimaryBackend == "" {
		return PrimaryHost
	}
	return s.PrimaryBackend
}

// runtimeUnavailable marks a preflight error that is the query runtime's:
// absent, unreachable, or failing its probe.
type runtimeUnavailable struct{ err error }

func (e runtimeUnavailable) Error() string { return e.err.Error() }
func (e runtimeUnavailable) Unwrap() error { return e.err }

// preflightTelemetry records Prepare's result. A run that passed preflight
// gets its record in the run's protected telemetry file (archived with the
// audit log). A failed one has no file to keep it (Prepare removes the
// private root), so the record goes to the operator's log, as one line of
// the same five fields.
func preflightTelemetry(o Options, runtime string, r *Run, err error) {
	primary := o.PrimaryBackend
	if primary == "" {
		primary = PrimaryHost
	}
	if err == nil {
		if r == nil {
			return
		}
		tel, terr := broker.OpenTelemetry(r.Layout.AuditDir, primary, runtime)
		if terr != nil {
			return
		}
		tel.Emit(broker.ClassPreflight, broker.StateSupported, "ready")
		tel.Close()
		return
	}
	class, state, category := broker.ClassPreflight, broker.StateUnavailable, "preflight-failed"
	var ru runtimeUnavailable
	switch {
	case errors.As(err, &ru):
		state, category = runtimeState(ru.err)
	case !strings.HasPrefix(err.Error(), "preflight: "):
		// Staging and the files after it: the run was starting.
		class, category = broker.ClassStartup, "prepare-failed"
	}
	if o.Progress == nil {
		return
	}
	_, _ = io.WriteString(o.Progress, "awf: telemetry: ")
	_ = broker.WriteTelemetry(o.Progress, broker.NewTelemetry(primary, runtime, class, state, category))
}

// runtimeState is the telemetry capability state of a query runtime that
// could not be opened or probed: blocked when a security preflight refuses
// it by design (sbx), unavailable otherwise.
func runtimeState(err error) (state, category string) {
	if errors.Is(err, sbx.ErrBlocked) {
		return broker.StateBlocked, "query-security-block"
	}
	return broker.StateUnavailable, "query-runtime-unavailable"
}

// shutdownSettle is how long Serve's shutdown waits for connections that
// are already done to be counted as such, before it kills in-flight jobs.
const shutdownSettle = 100 * time.Millisecond

// ShutdownGrace bounds how long a stopping broker waits for in-flight jobs.
const ShutdownGrace = 15 * time.Second

// HostConfig returns the runtime host configuration of a spec.
func (s Spec) HostConfig() isolate.HostConfig {
	return isolate.HostConfig{
		RunID:        s.Layout.RunID,
		StateDir:     s.Layout.StateDir,
		CgroupParent: s.CgroupParent,
		RunscPath:    s.RunscPath,
		DockerSocket: s.DockerSocket,
		SandboxCPUs:  s.AgentCgroup.CPUs.Sandbox,
	}
}

// Serve is the broker process: it re-checks the rootfs and the seeds, opens
// and sweeps the runtime, listens on the socket, reports readiness on ready
// (one line, then closed), and serves until ctx ends. Then it freezes
// admissions, waits for in-flight jobs, sweeps again, and returns.
func Serve(ctx context.Context, s Spec, ready io.WriteCloser, logw io.Writer) (err error) {
	l := s.Layout
	audit, err := broker.OpenAudit(l.AuditDir, AuditFile(s))
	if err != nil {
		return err
	}
	defer audit.Close()
	tel, err := broker.OpenTelemetry(l.AuditDir, primaryBackend(s), s.Runtime)
	if err != nil {
		return err
	}
	defer tel.Close()
	failState := func(state, category string, e error) error {
		audit.Lifecycle("startup-failed", e.Error())
		tel.Emit(broker.ClassStartup, state, category)
		return e
	}
	fail := func(category string, e error) error { return failState(broker.StateUnavailable, category, e) }

	// The agent must be freezable and kept off the sandboxes' CPUs before
	// the first request; the broker itself runs on the sandbox side.
	freezer := s.AgentCgroup.Freezer()
	if s.AgentCgroup.FreezerDir == "" {
		return fail("agent-cgroup-missing", errors.New("broker spec names no agent cgroup: metered queries could not freeze the agent"))
	}
	if err := freezer.Check(); err != nil {
		return fail("agent-cgroup-missing", err)
	}
	if s.AgentCgroup.CPUs.Sandbox == "" && runtime.NumCPU() > 1 {
		return fail("cpu-split-missing", fmt.Errorf("broker spec has no CPU split on a %d-CPU host", runtime.NumCPU()))
	}
	if err := PinProcess(s.AgentCgroup.CPUs.Sandbox); err != nil {
		return fail("cpu-pin-failed", err)
	}
	if _, err := rootfs.Verify(ctx, s.RootFS, s.RootFSDigest); err != nil {
		return fail("rootfs-mismatch", err)
	}
	seeds, err := staging.LoadSeeds(ctx, l.PrivateRoot)
	if err != nil {
		return fail("seed-invalid", err)
	}
	pol, err := policy.Default()
	if err != nil {
		return fail("policy-invalid", err)
	}
	h := s.HostConfig()
	h.Progress = logw // the docker backend's first image import takes seconds
	rt, err := runtimes.Open(s.Runtime, h)
	if err != nil {
		state, category := runtimeState(err)
		return failState(state, category, err)
	}
	if err := rt.Usable(); err != nil {
		rt.Close()
		state, category := runtimeState(err)
		return failState(state, category, err)
	}
	defer rt.Close()
	if err := rt.Sweep(ctx); err != nil {
		return fail("sweep-failed", fmt.Errorf("start-up sweep: %w", err))
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if serr := rt.Sweep(sctx); serr != nil {
			audit.Lifecycle("shutdown-cleanup-failed", serr.Error())
			tel.Emit(broker.ClassCleanup, broker.StateSupported, broker.ReasonCleanupFailed)
			err = errors.Join(err, serr)
			return
		}
		tel.Emit(broker.ClassCleanup, broker.StateSupported, "swept")
	}()

	limits := isolate.DefaultLimits()
	limits.MemoryBytes = s.MemoryBytes
	limits.Wall = time.Duration(s.TimeoutSeconds) * time.Second
	var kind broker.JobKind = broker.QueryKind{}
	if s.Kind == KindProbe {
		kind, limits.OutputBytes = broker.ProbeKind{}, proto.MaxProbeResultBytes
	}
	if err := limits.Validate(); err != nil {
		return fail("limits-invalid", err)
	}
	bs := make([]broker.Seed, 0, len(seeds))
	for _, sd := range seeds {
		bs = append(bs, broker.Seed{Repo: sd.Repo, Dir: sd.Dir, Sensitivity: sd.Sensitivity})
		audit.Lifecycle("seed", fmt.Sprintf("repo=%s sensitivity=%s commit=%s", sd.Repo, sd.Sensitivity, sd.Commit))
	}
	tmpl := isolate.Template{RunID: l.RunID, RootFS: s.RootFS, Limits: limits, Policy: pol}
	if err := warmSeeds(ctx, rt, tmpl, bs); err != nil {
		return fail("seed-warm-failed", err)
	}
	// One lane for every broker of the run: one sandbox at a time.
	lane := make(chan struct{}, 1)
	// Only bounded queries keep a warm pool; sealed probes prepare each
	// sandbox inside its request. A side broker (sealed probes, bounded
	// agents) opens a runtime of its own beside the pool's idle sandboxes;
	// every backend names its sandboxes apart across instances of one run
	// (direct TestInstancesOfOneRunNameApart).
	warm := s.WarmPool
	if s.Kind == KindProbe {
		warm = 0
	}
	b, err := broker.New(broker.Options{
		Lane:           lane,
		Kind:           kind,
		Runtime:        rt,
		Template:       tmpl,
		Seeds:          bs,
		MaxInvocations: s.MaxInvocations,
		Timeout:        limits.Wall,
		Audit:          audit,
		Telemetry:      tel,
		Freezer:        freezer,
		WarmPool:       warm,
	})
	if err != nil {
		return fail("broker-invalid", err)
	}
	// The warm pool fills once the broker is ready (below); its idle
	// sandboxes go before the runtime's last sweep (deferred earlier, so
	// run later), and Close waits for the fill's step under way.
	defer func() {
		if cerr := b.Close(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if s.Probe != nil {
		ps, perr := startProbes(ctx, s, pol, tel, lane, freezer)
		if perr != nil {
			return fail("probe-startup-failed", perr)
		}
		defer func() {
			if perr := ps.stop(ctx); perr != nil {
				err = errors.Join(err, perr)
			}
		}()
	}
	if s.Agents != nil {
		// fd 4 is the broker's end of the API proxy's control channel
		// (StartBroker); startAgents takes it over.
		as, aerr := startAgents(ctx, s, *s.Agents, pol, tel, lane, freezer, os.NewFile(AgentControlFD, "api-proxy-control"))
		if aerr != nil {
			return fail("agent-startup-failed", aerr)
		}
		defer func() {
			if aerr := as.stop(ctx); aerr != nil {
				err = errors.Join(err, aerr)
			}
		}()
	}
	// The socket directory stays root-only until the socket carries the
	// agent's ownership; only then is the directory handed over.
	if err := os.MkdirAll(l.SocketDir, 0o700); err != nil {
		return fail("socket-failed", err)
	}
	ln, err := broker.ListenUnix(l.Socket, s.SocketUID, s.SocketGID)
	if err != nil {
		return fail("socket-failed", err)
	}
	if err := os.Chown(l.SocketDir, s.SocketUID, s.SocketGID); err != nil {
		ln.Close()
		return fail("socket-failed", err)
	}
	srv := broker.NewServer(b, audit)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	audit.Lifecycle("listening", fmt.Sprintf("socket=%s repos=%d backend=%s ingress=unix maxInvocations=%d uid=%s",
		l.Socket, len(bs), s.Runtime, s.MaxInvocations, strconv.Itoa(s.SocketUID)))
	tel.Emit(broker.ClassStartup, broker.StateSupported, "ready")
	if ready != nil {
		_, _ = io.WriteString(ready, "ready\n")
		ready.Close()
	}
	// The first fill runs now, one seed per hold of the lane, so that
	// many seeds do not delay readiness; a request meanwhile waits for
	// one seed's step at most, or runs cold. Its failures are audited;
	// a fill that leaves the runtime unusable fails every later request
	// closed, as a refill's would.
	go func() { _ = b.FillPool(ctx) }()
	// An accept loop that fails ends the broker with its error, after the
	// shutdown below: the run must not look like a clean stop.
	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		if err != nil {
			fmt.Fprintf(logw, "awf broker: %v\n", err)
			serveErr = fmt.Errorf("broker: serve: %w", err)
		}
	}
	audit.Lifecycle("shutdown", fmt.Sprintf("requests=%d", b.Used()))
	// The broker stops when the agent is gone or awf was interrupted: an
	// in-flight query has nobody left to answer, so it is killed now (the
	// sandboxes are swept below) rather than waited for. The moment of
	// grace only lets Shutdown see that nothing was in flight: with a
	// context already done it could report a kill that did not happen.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownSettle)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		audit.Lifecycle(broker.LifecycleCancelled, "in-flight queries killed at shutdown")
	}
	return serveErr
}

// seedWarmTimeout bounds one seed's one-off warm-up.
const seedWarmTimeout = 10 * time.Minute

// warmSeeds does a runtime's one-off per-seed work (the direct runtime's
// private view copy) before the broker serves, each seed under its own
// deadline, rather than inside a first request's bucket. A runtime that is
// no isolate.Warmer has none.
func warmSeeds(ctx context.Context, rt isolate.Runtime, tmpl isolate.Template, seeds []broker.Seed) error {
	w, ok := rt.(isolate.Warmer)
	if !ok {
		return nil
	}
	for _, sd := range seeds {
		t := tmpl
		t.Repo = sd.Dir
		wctx, cancel := context.WithTimeout(ctx, seedWarmTimeout)
		err := w.Warm(wctx, t)
		cancel()
		if err != nil {
			return fmt.Errorf("warm %s: %w", sd.Repo, err)
		}
	}
	return nil
}
