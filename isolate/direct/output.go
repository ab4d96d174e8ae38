package direct

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
)

// readOutput reads path (/query/out, or an enclave's result) through the
// sandbox's dirfd of its directory without following any link, crossing
// any mount or blocking on a fifo, and only if it is a regular file of at
// most limit bytes.
func readOutput(qfd int, path string, limit int64) ([]byte, isolate.Kind, string) {
	fd, err := unix.Openat2(qfd, filepath.Base(path), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, isolate.KindOutputMissing, "no " + path
	case err != nil:
		return nil, isolate.KindOutputInvalid, fmt.Sprintf("open %s: %v", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, isolate.KindOutputInvalid, fmt.Sprintf("stat %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, isolate.KindOutputInvalid, fmt.Sprintf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, isolate.KindOutputTooLarge, fmt.Sprintf("%s has %d bytes, cap %d", path, fi.Size(), limit)
	}
	buf := make([]byte, limit+1)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	if int64(n) > limit {
		return nil, isolate.KindOutputTooLarge, fmt.Sprintf("%s is over the cap of %d bytes", path, limit)
	}
	return buf[:n], isolate.KindOK, ""
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

// capWriter keeps the first max bytes written and silently drops the rest,
// so the job's output is always drained and never blocks it.
type capWriter struct {
	mu      sync.Mutex
	max     int64
	buf     []byte
	dropped int64
}

func newCapWriter(max int64) *capWriter { return &capWriter{max: max} }

// Write implements io.Writer; it never fails.
func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.max - int64(len(w.buf))
	if room > int64(len(p)) {
		room = int64(len(p))
	}
	if room > 0 {
		w.buf = append(w.buf, p[:room]...)
	}
	w.dropped += int64(len(p)) - max(room, 0)
	return len(p), nil
}

// Bytes returns a copy of what was kept.
func (w *capWriter) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.buf...)
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
