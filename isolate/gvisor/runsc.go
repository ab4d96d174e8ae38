package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/ownthread"
	"github.com/awf-project/awf/isolate/workspace"
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
	out := &workspace.Capture{Max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	// From a thread of its own, so that its parent-death signal cannot fire
	// while it runs (see isolate/ownthread).
	err := ownthread.Run(cmd)
	text := string(out.Bytes())
	if err != nil {
		return text, fmt.Errorf("runsc %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(text))
	}
	return text, nil
}

// reclaimContainer kills every process of the runsc container whose state
// root is stateRoot and removes that state root, runsc's state for it.
//
// It does not ask runsc to: every process runsc starts for a container (the
// runsc command, the sandbox, the gofer) has stateRoot as its --root flag,
// so this kills them itself (killContainerProcs), waits until each is dead
// and removes the state root, which is all that is left of the container
// on the host (its cgroup and its workspace mounts are the caller's,
// removed after). runsc delete would do the same, but it waits for the
// dead sandbox and gofer to be reaped, and once their runsc command is gone
// they are the host init's children: that wait is as long as the init's
// reaping takes (seconds, on some hosts), which the reclaim of a killed run
// cannot spend. A process that does not die (stuck in uninterruptible
// sleep) keeps the state and is an error once ctx ends or after
// reclaimWait: the caller fails closed. runsc, the binary, is not run; id
// (the container, "" when unknown) names it in errors.
func reclaimContainer(ctx context.Context, _, stateRoot, id string) error {
	ctx, cancel := context.WithTimeout(ctx, reclaimWait)
	defer cancel()
	if err := killContainerProcs(ctx, stateRoot); err != nil {
		return fmt.Errorf("gvisor: container %q: %w", id, err)
	}
	if err := os.RemoveAll(stateRoot); err != nil {
		return fmt.Errorf("gvisor: container %q: remove runsc state: %w", id, err)
	}
	return nil
}

// reclaimWait bounds how long reclaimContainer waits for the processes of
// a container to die.
const reclaimWait = 10 * time.Second

// killContainerProcs sends SIGKILL to every live process of the container
// whose runsc state root is stateRoot until none is left, or ctx ends. Each
// is signalled through a pidfd, opened before its command line is checked
// once more so that a pid reused by another process is never signalled,
// and waited for through it: a process is dead once its whole thread group
// has exited (its zombie holds nothing but its pid and has no command line
// left).
func killContainerProcs(ctx context.Context, stateRoot string) error {
	for {
		pids := containerProcs(stateRoot)
		if len(pids) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d runsc processes did not die: %w", len(pids), err)
		}
		var fds []int
		for _, pid := range pids {
			fd, err := unix.PidfdOpen(pid, 0)
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			if err != nil {
				// No pidfds (a kernel before 5.3): a plain kill, checked
				// by the next scan.
				if isContainerProc(pid, stateRoot) {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
				continue
			}
			if isContainerProc(pid, stateRoot) {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				fds = append(fds, fd)
			} else {
				unix.Close(fd)
			}
		}
		err := waitPidfds(ctx, fds)
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err == nil && len(fds) == 0 {
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		if err != nil {
			return fmt.Errorf("%d runsc processes did not die: %w", len(pids), err)
		}
	}
}

// waitPidfds waits until every process of fds has exited, or ctx ends.
func waitPidfds(ctx context.Context, fds []int) error {
	for _, fd := range fds {
		for {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 20)
			if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// containerProcs lists the processes whose command line has
// "--root=stateRoot" as an argument.
func containerProcs(stateRoot string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && isContainerProc(pid, stateRoot) {
			out = append(out, pid)
		}
	}
	return out
}

// isContainerProc reports whether process pid has "--root=stateRoot" as
// an argument. The path is compared as a string, never resolved: any
// process may name any path, and resolving one (a hung FUSE mount, say)
// could block the reclaim. The runtime builds every state root's path one
// way (under its state dir), for runsc and for the reclaim alike.
func isContainerProc(pid int, stateRoot string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	want := filepath.Clean(stateRoot)
	for _, a := range bytes.Split(b, []byte{0}) {
		if r, ok := bytes.CutPrefix(a, []byte("--root=")); ok && filepath.Clean(string(r)) == want {
			return true
		}
	}
	return false
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
