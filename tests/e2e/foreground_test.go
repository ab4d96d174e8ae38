package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture/curlquery"
)

// fgBroker is "awf broker --config F" running in the foreground.
type fgBroker struct {
	cmd    *exec.Cmd
	socket string
	stderr *bytes.Buffer
	done   chan error
}

// startForeground starts a foreground broker and waits for its socket line.
func startForeground(t *testing.T, cfg string) *fgBroker {
	t.Helper()
	cmd := exec.Command(awfBin, "broker", "--config", cfg)
	cmd.Dir = "/"
	cmd.Env = baseEnv()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	b := &fgBroker{cmd: cmd, stderr: &errb, done: make(chan error, 1)}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() { b.done <- cmd.Wait() }()
	t.Cleanup(func() { b.stop(t) })
	deadline := time.After(3 * time.Minute)
	for b.socket == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "broker exited: %s", errb.String())
			if s, found := strings.CutPrefix(l, "socket: "); found {
				b.socket = s
			}
		case <-deadline:
			t.Fatalf("broker not ready: %s", errb.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return b
}

// stop sends SIGTERM and waits; it kills the group if the broker hangs.
func (b *fgBroker) stop(t *testing.T) {
	if b.cmd.ProcessState != nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	defer func() { removeArchive(t, b.stderr.String()) }()
	select {
	case <-b.done:
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
		t.Errorf("foreground broker did not stop on SIGTERM")
	}
}

// wrapperRequest is curlquery.Request as bytes: a request exactly as the
// reference shell wrapper's curl invocation sends it.
func wrapperRequest(repo, schema, script string) []byte {
	return []byte(curlquery.Request(repo, schema, script))
}

// exchange sends one raw request and returns the whole raw response.
func exchange(t *testing.T, socket string, req []byte) string {
	t.Helper()
	c, err := net.Dial("unix", socket)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(2*time.Minute)))
	_, err = c.Write(req)
	require.NoError(t, err)
	resp, err := io.ReadAll(c)
	require.NoError(t, err)
	return string(resp)
}

// body returns the body of a raw response after checking its exact head.
func body(t *testing.T, resp string) string {
	t.Helper()
	head, b, ok := strings.Cut(resp, "\r\n\r\n")
	require.True(t, ok, resp)
	require.Equal(t, fmt.Sprintf("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncache-control: no-store\r\ncontent-length: %d\r\nconnection: close", len(b)), head)
	return b
}
