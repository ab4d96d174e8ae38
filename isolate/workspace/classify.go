package workspace

import (
	"bytes"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
)

// RelabelLimits turns a nonzero exit into the limit outcome that caused it,
// for backends that cannot read the kernel's limit counters after the job
// (the Engine removes the cgroup; the Sentry keeps its own). backend names
// the runtime in the detail, and pidsLimit says how the pids limit is
// enforced there. Either relabelling only changes the audit record.
func (w *Workspace) RelabelLimits(o *isolate.Outcome, t isolate.Template, backend, pidsLimit string) {
	if o.Kind != isolate.KindNonzeroExit {
		return
	}
	if !t.Weaken.NoPidsLimit && hitTaskLimit(o.Stderr) {
		o.Kind = isolate.KindPidsLimit
		o.Detail = fmt.Sprintf("%s: the job could not start a process or thread past %s %d", backend, pidsLimit, t.Limits.Pids)
		return
	}
	if w.hitFileSize(t.Limits.FileSizeBytes, o.Stderr) {
		o.Kind = isolate.KindFileSizeLimit
		o.Detail = fmt.Sprintf("%s: a write reached the file size limit %d bytes", backend, t.Limits.FileSizeBytes)
	}
}

// Conclude finishes the outcome o of a job that ran in w: the limit
// relabelling (see RelabelLimits), then, for a job that succeeded, the
// output read from the host side, timed as Timings.Read. Both backends
// that run in a workspace end a job this one way.
func (w *Workspace) Conclude(o isolate.Outcome, t isolate.Template, backend, pidsLimit string) isolate.Outcome {
	return w.ConcludeFrom(o, t, backend, pidsLimit, isolate.OutputPath)
}

// ConcludeFrom is Conclude with the output read from path, a file of the
// sandbox's /query tmpfs (ReadFileFrom): an enclave's result.
func (w *Workspace) ConcludeFrom(o isolate.Outcome, t isolate.Template, backend, pidsLimit, path string) isolate.Outcome {
	w.RelabelLimits(&o, t, backend, pidsLimit)
	if o.Kind != isolate.KindOK {
		return o
	}
	t1 := time.Now()
	out, kind, err := ReadFileFrom(w.QueryDir(), path, t.Limits.OutputBytes)
	o.Timings.Read = time.Since(t1)
	if kind != isolate.KindOK {
		o.Kind, o.Detail = kind, err.Error()
		return o
	}
	o.Output = out
	return o
}

// hitTaskLimit recognises CPython's reports of a refused fork or thread
// start (EAGAIN).
func hitTaskLimit(stderr []byte) bool {
	return bytes.Contains(stderr, []byte("RuntimeError: can't start new thread")) ||
		bytes.Contains(stderr, []byte("[Errno 11] Resource temporarily unavailable"))
}

// hitFileSize is HitFileSize over the workspace's /query and repository
// view.
func (w *Workspace) hitFileSize(limit int64, stderr []byte) bool {
	return HitFileSize(limit, stderr, w.QueryDir(), filepath.Join(w.Dir, repoFSName))
}

// HitFileSize reports whether a failed job ran into RLIMIT_FSIZE, by the
// one rule every backend uses. CPython ignores SIGXFSZ, so such a job just
// fails with EFBIG. A file at the limit in dirs (the host-side /query and
// repository view) shows it; for files elsewhere only CPython's report of
// EFBIG on stderr does. The result is an audit label only.
func HitFileSize(limit int64, stderr []byte, dirs ...string) bool {
	if FindFileAtLimit(limit, dirs...) != "" {
		return true
	}
	return bytes.Contains(stderr, []byte("[Errno 27] File too large"))
}

// ExitOutcome turns a job's exit status, as a runtime that reports a death
// by signal N as status 128+N gives it, into a typed outcome. backend names
// the runtime in the detail.
func ExitOutcome(backend string, code int) isolate.Outcome {
	if code == 0 {
		return isolate.Outcome{Kind: isolate.KindOK}
	}
	if code > 128 && code < 128+65 {
		sig := syscall.Signal(code - 128)
		o := isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: -1, Signal: unix.SignalName(sig)}
		switch sig {
		case syscall.SIGSYS:
			o.Kind, o.Detail = isolate.KindSeccompKill, backend+": killed by the seccomp policy (SIGSYS)"
		case syscall.SIGXFSZ:
			o.Kind, o.Detail = isolate.KindFileSizeLimit, backend+": file size limit reached (SIGXFSZ)"
		default:
			o.Detail = fmt.Sprintf("%s: job killed by %s", backend, o.Signal)
		}
		return o
	}
	return isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: code, Detail: fmt.Sprintf("%s: job exited with status %d", backend, code)}
}
