package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/awf-project/awf/isolate/ownthread"
	"github.com/awf-project/awf/proto"
)

// ReadyTimeout bounds the broker's start-up.
const ReadyTimeout = 2 * time.Minute

// BrokerProc is the running broker process.
type BrokerProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	// killerDone, when set (KillSandboxesIfBrokerDies), is closed once the
	// kill of the run's sandboxes that the broker's end starts is over:
	// Teardown's sweep waits for it, so that only one of them acts on the
	// sandboxes' cgroups at a time.
	killerDone chan struct{}
}

// StartBroker starts the broker as a child process of exe ("awf broker
// --serve SPEC") in a new, empty network namespace, waits for it to report
// readiness, and proves the socket answers with the canonical error on a
// non-query route (which is never counted).
func StartBroker(ctx context.Context, exe string, r *Run, logw io.Writer) (*BrokerProc, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	defer pr.Close()
	cmd := exec.Command(exe, "broker", "--serve", r.Layout.SpecPath)
	cmd.Env = brokerEnv()
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logw, logw
	cmd.ExtraFiles = []*os.File{pw}
	if r.Spec.Agents != nil {
		// fd 4: the broker's end of the API proxy's control channel.
		if r.agentControl == nil {
			pw.Close()
			return nil, errors.New("broker: bounded agents need the API proxy's control channel (Run.NewAgentControl)")
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, r.agentControl)
		defer func() { r.agentControl.Close(); r.agentControl = nil }()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	// From a thread of its own: the parent-death signal follows the forking
	// thread, which must outlive the broker (see isolate/ownthread).
	done, err := ownthread.Start(cmd)
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("broker: start: %w", err)
	}
	pw.Close()
	b := &BrokerProc{cmd: cmd, exited: make(chan struct{})}
	go func() { b.err = <-done; close(b.exited) }()

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(pr).ReadString('\n')
		line <- s
	}()
	t := time.NewTimer(ReadyTimeout)
	defer t.Stop()
	select {
	case s := <-line:
		if s != "ready\n" {
			b.Stop(context.Background())
			return nil, errors.New("broker: exited before it was ready (see its messages above)")
		}
	case <-t.C:
		b.Stop(context.Background())
		return nil, fmt.Errorf("broker: not ready after %v", ReadyTimeout)
	case <-ctx.Done():
		b.Stop(context.Background())
		return nil, ctx.Err()
	}
	want := `{"status":"error"}`
	if r.Spec.Kind == KindProbe {
		want = proto.ProbeErrorBody
	}
	if err := probeSocketWant(r.Layout.Socket, 10*time.Second, want); err != nil {
		b.Stop(context.Background())
		return nil, fmt.Errorf("broker: socket is not serving: %w", err)
	}
	if r.Spec.Probe != nil {
		if err := probeSocketWant(r.Spec.Probe.Socket, 10*time.Second, proto.ProbeErrorBody); err != nil {
			b.Stop(context.Background())
			return nil, fmt.Errorf("broker: sealed-probe socket is not serving: %w", err)
		}
	}
	return b, nil
}

// brokerEnv is the broker's whole environment: no credential, no proxy.
// GITHUB_RUN_ID, when set, is passed on so that the broker's audit records
// name the CI run as the staging records do; it is an identifier, not a
// credential.
func brokerEnv() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	if id := os.Getenv("GITHUB_RUN_ID"); id != "" {
		env = append(env, "GITHUB_RUN_ID="+id)
	}
	return env
}

// ProbeSocket sends one uncounted request to a non-query route and expects
// the canonical error response.
func ProbeSocket(path string, timeout time.Duration) error {
	return probeSocketWant(path, timeout, `{"status":"error"}`)
}

// probeSocketWant is ProbeSocket for a broker whose canonical error body is
// want (sealed probes answer {"result":"ERROR"}).
func probeSocketWant(path string, timeout time.Duration, want string) error {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "GET /ready HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		return err
	}
	resp, err := io.ReadAll(io.LimitReader(c, 4096))
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(resp), "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(string(resp), "\r\n\r\n"+want) {
		return fmt.Errorf("unexpected probe response %q", resp)
	}
	return nil
}

// Stop asks the broker to shut down (SIGTERM), waits for it within ctx plus
// a grace, and kills it after that.
func (b *BrokerProc) Stop(ctx context.Context) error {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(ShutdownGrace + 45*time.Second)
	defer t.Stop()
	select {
	case <-b.exited:
		return exitErr(b.err)
	case <-t.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.exited
	return fmt.Errorf("broker: killed after the shutdown grace: %w", exitErr(b.err))
}

// waitKiller waits until the kill that KillSandboxesIfBrokerDies starts
// when the broker ends is over (at once when none was set up), or ctx ends.
func (b *BrokerProc) waitKiller(ctx context.Context) error {
	if b.killerDone == nil {
		return nil
	}
	select {
	case <-b.killerDone: // over: whatever ctx says
		return nil
	default:
	}
	select {
	case <-b.killerDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker: the kill of the run's sandboxes: %w", ctx.Err())
	}
}

// Cancel asks the broker to stop now (SIGTERM) without waiting: on
// SIGINT/SIGTERM to awf it stops admissions and kills a running query,
// which also thaws an agent frozen for that query, so that the agent can
// act on its own SIGTERM inside its grace.
func (b *BrokerProc) Cancel() { _ = b.cmd.Process.Signal(syscall.SIGTERM) }

// Exited is closed when the broker process has ended.
func (b *BrokerProc) Exited() <-chan struct{} { return b.exited }

func exitErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("broker: %w", err)
}
