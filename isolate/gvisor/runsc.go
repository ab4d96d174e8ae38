package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/awf-project/awf/isolate/ownthread"
)

// runscEnv is the whole environment runsc runs with.
var runscEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}

// globalArgs are the runsc flags that come before the subcommand. Every
// sandbox gets no network, no host sockets or FIFOs, no overlay over the
// read-only root, and its own state root and log file.
func globalArgs(stateRoot, logFile, platform string, seccomp bool, hostNet bool) []string {
	net := "--network=none"
	if hostNet {
		net = "--network=host"
	}
	a := []string{
		"--root=" + stateRoot,
		"--log=" + logFile,
		"--log-format=json",
		net,
		"--platform=" + platform,
		"--host-uds=none",
		"--host-fifo=none",
		"--overlay2=none",
	}
	if seccomp {
		a = append(a, "--oci-seccomp")
	}
	return a
}

// runscCommand runs a short runsc management command (kill, delete, list,
// flags) with a deadline and returns its combined output, capped.
func runscCommand(ctx context.Context, runsc string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, runsc, args...)
	cmd.Env = runscEnv
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout = &capped{w: &out, n: 64 << 10}
	cmd.Stderr = cmd.Stdout
	// From a thread of its own, so that its parent-death signal cannot fire
	// while it runs (see isolate/ownthread).
	err := ownthread.Run(cmd)
	if err != nil {
		return out.String(), fmt.Errorf("runsc %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// capped writes at most n bytes to w and drops the rest.
type capped struct {
	w interface{ Write([]byte) (int, error) }
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.n > 0 {
		q := p
		if len(q) > c.n {
			q = q[:c.n]
		}
		c.n -= len(q)
		_, _ = c.w.Write(q)
	}
	return len(p), nil
}

// hasContainerState reports whether runsc still keeps state for any
// container under stateRoot.
func hasContainerState(stateRoot string) bool {
	m, _ := filepath.Glob(filepath.Join(stateRoot, "*.state"))
	return len(m) > 0
}

// reclaimContainer kills and force-deletes container id under stateRoot, if
// runsc still knows it.
func reclaimContainer(ctx context.Context, runsc, stateRoot, id string) error {
	if runsc == "" || id == "" {
		return nil
	}
	if _, err := os.Stat(stateRoot); err != nil || !hasContainerState(stateRoot) {
		return nil
	}
	root := "--root=" + stateRoot
	_, _ = runscCommand(ctx, runsc, 3*time.Second, root, "kill", "--all", id, "KILL")
	_, err := runscCommand(ctx, runsc, 5*time.Second, root, "delete", "--force", id)
	if err == nil || !hasContainerState(stateRoot) {
		return nil
	}
	// The container's own `runsc run`, when it still lives (a sweep of a
	// runtime whose process did not die), tears the container down once
	// the kill reached it, and may have waited for the lock the delete
	// held: give it the time to finish, then delete once more.
	for range 20 {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
		if !hasContainerState(stateRoot) {
			return nil
		}
	}
	if _, err2 := runscCommand(ctx, runsc, 5*time.Second, root, "delete", "--force", id); err2 != nil && hasContainerState(stateRoot) {
		return errors.Join(err, err2)
	}
	return nil
}

// runscLogError returns the error runsc itself logged (a JSON line per
// entry), capped, or "" when it logged none.
func runscLogError(logFile string) string {
	b, err := os.ReadFile(logFile)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}
