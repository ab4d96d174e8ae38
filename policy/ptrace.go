package policy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxFilters bounds how many stacked filters ReadFilters reads.
const MaxFilters = 64

// ReadFilters returns the seccomp filters attached to thread tid, newest
// first, as the kernel holds them (after runc's patching). It attaches with
// PTRACE_SEIZE, stops the thread with PTRACE_INTERRUPT, reads each filter
// with PTRACE_SECCOMP_GET_FILTER and detaches. It needs CAP_SYS_ADMIN, a
// kernel with CONFIG_CHECKPOINT_RESTORE, and no other tracer on tid. ctx
// bounds the wait for the thread to stop.
func ReadFilters(ctx context.Context, tid int) (filters [][]unix.SockFilter, err error) {
	// Every ptrace request must come from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceSeize(tid); err != nil {
		return nil, fmt.Errorf("read filters of %d: seize: %w", tid, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			// Not in a ptrace-stop: PTRACE_DETACH would fail. Stop it to
			// detach; if that fails too the thread is gone.
			if unix.PtraceInterrupt(tid) != nil || waitStop(context.Background(), tid, time.Second) != nil {
				return
			}
		}
		if derr := unix.PtraceDetach(tid); derr != nil && err == nil {
			err = fmt.Errorf("read filters of %d: detach: %w", tid, derr)
		}
	}()
	if err := unix.PtraceInterrupt(tid); err != nil {
		return nil, fmt.Errorf("read filters of %d: interrupt: %w", tid, err)
	}
	if err := waitStop(ctx, tid, 0); err != nil {
		return nil, fmt.Errorf("read filters of %d: %w", tid, err)
	}
	stopped = true
	for i := 0; i < MaxFilters; i++ {
		n, errno := getFilter(tid, i, nil)
		if errno == unix.ENOENT {
			return filters, nil
		}
		if errno != 0 {
			if errno == unix.EINVAL && i == 0 {
				return nil, fmt.Errorf("read filters of %d: thread has no seccomp filter", tid)
			}
			return nil, fmt.Errorf("read filters of %d: filter %d: %w", tid, i, errno)
		}
		if n == 0 || n > MaxBPFInstructions {
			return nil, fmt.Errorf("read filters of %d: filter %d has %d instructions", tid, i, n)
		}
		prog := make([]unix.SockFilter, n)
		if m, errno := getFilter(tid, i, prog); errno != 0 || m != n {
			return nil, fmt.Errorf("read filters of %d: filter %d: read %d of %d instructions: %v", tid, i, m, n, errno)
		}
		filters = append(filters, prog)
	}
	return nil, fmt.Errorf("read filters of %d: more than %d filters", tid, MaxFilters)
}

// getFilter issues PTRACE_SECCOMP_GET_FILTER for filter index i (0 is the
// newest). With a nil buffer it returns the instruction count.
func getFilter(tid, i int, buf []unix.SockFilter) (int, unix.Errno) {
	var ptr uintptr
	if len(buf) > 0 {
		ptr = uintptr(unsafe.Pointer(&buf[0]))
	}
	n, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(tid), uintptr(i), ptr, 0, 0)
	runtime.KeepAlive(buf)
	return int(n), errno
}

// waitStop waits until tid reports a stop. limit > 0 adds its own deadline.
func waitStop(ctx context.Context, tid int, limit time.Duration) error {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	for delay := 100 * time.Microsecond; ; {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("wait: %w", err)
		case pid == tid && ws.Stopped():
			return nil
		case pid == tid && (ws.Exited() || ws.Signaled()):
			return fmt.Errorf("thread exited while being stopped")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for stop: %w", ctx.Err())
		case <-time.After(delay):
		}
		if delay < 10*time.Millisecond {
			delay *= 2
		}
	}
}
