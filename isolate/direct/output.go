package direct

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
)

// readOutput reads path (/query/out, or an enclave's result) through the
// sandbox's dirfd of its directory, as every backend reads a sandbox's
// output (workspace.ReadFileAt); the detail is for the audit log.
func readOutput(qfd int, path string, limit int64) ([]byte, isolate.Kind, string) {
	b, kind, err := workspace.ReadFileAt(qfd, path, limit)
	if err != nil {
		return nil, kind, err.Error()
	}
	return b, kind, ""
}

// fileSizeDirs are the host-side directories in which a file at the
// file-size limit shows that RLIMIT_FSIZE stopped the job: the repository
// view's upper layer and, through the descriptor kept for the output, the
// sandbox's /query.
func (sb *sandbox) fileSizeDirs() []string {
	dirs := []string{sb.sc.upper}
	if sb.qfd >= 0 {
		dirs = append(dirs, fmt.Sprintf("/proc/self/fd/%d/", sb.qfd))
	}
	return dirs
}

// exitInfo is a decoded process status.
type exitInfo struct {
	code   int
	signal string
	signo  unix.Signal
}

func exitStatus(ps *os.ProcessState) exitInfo {
	if ps == nil {
		return exitInfo{code: -1}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return exitInfo{code: ps.ExitCode()}
	}
	if ws.Signaled() {
		sig := unix.Signal(ws.Signal())
		return exitInfo{code: -1, signal: unix.SignalName(sig), signo: sig}
	}
	return exitInfo{code: ws.ExitStatus()}
}
