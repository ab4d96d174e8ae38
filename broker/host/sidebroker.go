package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/staging"
)

// A side broker is a broker of the run beside the query broker: sealed
// probes (probe.go) and bounded agents (boundedagents_run.go). Each has its
// own seed map, runtime state dir, socket and audit log inside the run's
// broker process, and shares the run's lane and freezer. What they do alike
// (open and sweep the runtime, serve the socket, stop, release their seeds,
// write their skill and CLI) is written here once; what differs (limits,
// kind, the enclave wiring) stays with each.

// SideSpec is what every side broker's part of the broker spec has: its
// runtime, and where it keeps its files.
type SideSpec struct {
	Runtime      string
	RunscPath    string
	DockerSocket string
	// PrivateRoot holds the side broker's seeds and their seed map (0700),
	// apart from the query seeds: a repository may be configured for both,
	// and each broker has its own ledger over its own seed map.
	PrivateRoot string
	// StateDir is the side runtime's state and journal.
	StateDir string
	// SocketDir holds Socket, the side broker's own.
	SocketDir string
	Socket    string
	// SkillPath and CLIPath are its skill and agent CLI, in the agent's
	// read-only skill directory.
	SkillPath string
	CLIPath   string
}

// sidePaths returns where the side broker name of the run of l keeps its
// files; skill is its skill's directory and cli its CLI's file name.
func sidePaths(l Layout, name, skill, cli string) SideSpec {
	return SideSpec{
		PrivateRoot: filepath.Join(l.PrivateRoot, name),
		StateDir:    filepath.Join(l.PrivateRoot, name+"-state"),
		SocketDir:   filepath.Join(l.IngressRoot, name+"-run"),
		Socket:      filepath.Join(l.IngressRoot, name+"-run", "broker.sock"),
		SkillPath:   filepath.Join(l.SkillDir, skill, "SKILL.md"),
		CLIPath:     filepath.Join(l.SkillDir, cli),
	}
}

// hostConfig is the side runtime's host configuration: the run's, on the
// side broker's own state directory, runsc and Docker socket.
func (p SideSpec) hostConfig(s Spec) isolate.HostConfig {
	h := s.HostConfig()
	h.StateDir, h.RunscPath, h.DockerSocket = p.StateDir, p.RunscPath, p.DockerSocket
	return h
}

// sideServer is a side broker as Serve runs it. Its zero value holds
// nothing; startSide fills it in order, and stop or failStartup releases
// whatever was filled.
type sideServer struct {
	// what names the broker in its errors ("sealed probes").
	what string
	// jobs names its jobs in the audit line of a kill at shutdown ("probes").
	jobs string
	// release, when set, is called once after the runtime is closed, for
	// what else the broker holds (the API proxy's control channel).
	release func()

	audit *broker.Audit
	rt    isolate.Runtime
	b     *broker.Broker
	srv   *broker.Server
	done  chan error
}

// openSide opens the audit file of a side broker in auditDir.
func openSide(what, jobs, auditDir, auditFile string) (*sideServer, error) {
	audit, err := broker.OpenAudit(auditDir, auditFile)
	if err != nil {
		return nil, err
	}
	return &sideServer{what: what, jobs: jobs, audit: audit}, nil
}

// failStartup undoes a start-up that failed with err: the runtime is swept
// and closed, the failure audited and the audit log closed.
func (ss *sideServer) failStartup(ctx context.Context, err error) {
	_ = ss.close(ctx)
	ss.audit.Lifecycle("startup-failed", err.Error())
	ss.audit.Close()
}

// openRuntime loads the seeds in seedRoot, opens the runtime name on h and
// sweeps what an earlier invocation left on its state dir.
func (ss *sideServer) openRuntime(ctx context.Context, seedRoot, name string, h isolate.HostConfig) ([]staging.Seed, error) {
	seeds, err := staging.LoadSeeds(ctx, seedRoot)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ss.what, err)
	}
	if ss.rt, err = runtimes.Open(name, h); err != nil {
		return nil, fmt.Errorf("%s: runtime %s: %w", ss.what, name, err)
	}
	if err := ss.rt.Sweep(ctx); err != nil {
		return nil, fmt.Errorf("%s: start-up sweep: %w", ss.what, err)
	}
	return seeds, nil
}

// serve serves ss.b on socket in dir. As for the query socket, dir stays
// root-only until the socket carries the agent's ownership; only then is
// it handed over.
func (ss *sideServer) serve(s Spec, dir, socket, runtime string, repos, maxInvocations int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: %w", ss.what, err)
	}
	ln, err := broker.ListenUnix(socket, s.SocketUID, s.SocketGID)
	if err != nil {
		return fmt.Errorf("%s: %w", ss.what, err)
	}
	if err := os.Chown(dir, s.SocketUID, s.SocketGID); err != nil {
		ln.Close()
		return fmt.Errorf("%s: %w", ss.what, err)
	}
	ss.srv = broker.NewServer(ss.b, ss.audit)
	ss.done = make(chan error, 1)
	go func() { ss.done <- ss.srv.Serve(ln) }()
	ss.audit.Lifecycle("listening", fmt.Sprintf("socket=%s repos=%d backend=%s maxInvocations=%d", socket, repos, runtime, maxInvocations))
	return nil
}

// stop kills in-flight jobs at once (the run is over: nobody is left to
// answer), sweeps and closes the runtime and closes the audit log. As
// Serve does for the query broker, the moment of grace only lets Shutdown
// see that nothing was in flight: with a context already done it could
// report a kill that did not happen.
func (ss *sideServer) stop(ctx context.Context) error {
	if ss.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownSettle)
		defer cancel()
		ss.audit.Lifecycle("shutdown", fmt.Sprintf("requests=%d", ss.b.Used()))
		if err := ss.srv.Shutdown(sctx); err != nil {
			ss.audit.Lifecycle(broker.LifecycleCancelled, "in-flight "+ss.jobs+" killed at shutdown")
		}
		<-ss.done
	}
	err := ss.close(ctx)
	if err != nil {
		ss.audit.Lifecycle("shutdown-cleanup-failed", err.Error())
	}
	ss.audit.Close()
	return err
}

// close destroys the broker's warm pool (its idle sandboxes or enclaves,
// once the server is down and before the last sweep), sweeps and closes
// the runtime, then calls release. Each runs once.
func (ss *sideServer) close(ctx context.Context) error {
	var err error
	if ss.b != nil {
		err = ss.b.Close(ctx)
		ss.b = nil
	}
	if ss.rt != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, ss.rt.Sweep(sctx))
		ss.rt.Close()
		ss.rt = nil
	}
	if ss.release != nil {
		ss.release()
		ss.release = nil
	}
	return err
}

// sweepSide sweeps the runtime name on h (teardown and crash reclamation)
// when its state dir exists; what says whose sweep failed.
func sweepSide(ctx context.Context, what, name string, h isolate.HostConfig) error {
	if _, err := os.Stat(h.StateDir); os.IsNotExist(err) {
		return nil
	}
	rt, err := runtimes.Open(name, h)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rt.Close()
	if err := rt.Sweep(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// releaseSideSeeds releases the seeds staged into root, if any were.
func releaseSideSeeds(ctx context.Context, root string) error {
	if _, err := os.Stat(filepath.Join(root, staging.SeedsDirName)); err != nil {
		return nil
	}
	return staging.Release(ctx, root)
}

// auditStaging is the OnEvent of every broker's staging (the query
// broker's and each side broker's): each seed staged or failed, and the
// credential's removal, go to that broker's audit log.
func auditStaging(audit *broker.Audit) func(staging.Event) {
	return func(ev staging.Event) {
		switch ev.Kind {
		case staging.EventSeedStaged:
			audit.Lifecycle("seed-staged", fmt.Sprintf("repo=%s sensitivity=%s commit=%s duration=%s", ev.Repo, ev.Sensitivity, ev.Commit, ev.Duration.Round(time.Millisecond)))
		case staging.EventSeedFailed:
			audit.Lifecycle("seed-failed", fmt.Sprintf("repo=%s: %v", ev.Repo, ev.Err))
		case staging.EventCredentialsRemoved:
			audit.Lifecycle("credentials-removed", "")
		}
	}
}

// writeSideIngress writes a side broker's skill (0644) into its own
// directory, which it creates in the skill directory, and its CLI (0555),
// read from cliSource, each exclusively.
func writeSideIngress(skillPath, skill, cliPath, cliSource string) error {
	if err := os.Mkdir(filepath.Dir(skillPath), 0o755); err != nil {
		return fmt.Errorf("ingress: %w", err)
	}
	if err := writeExclusive(skillPath, []byte(skill), 0o644); err != nil {
		return err
	}
	bin, err := os.ReadFile(cliSource)
	if err != nil {
		return fmt.Errorf("ingress: %w", err)
	}
	return writeExclusive(cliPath, bin, 0o555)
}
