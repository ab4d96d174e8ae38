package workspace

import (
	"bytes"
	"fmt"

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

// hitTaskLimit recognises CPython's reports of a refused fork or thread
// start (EAGAIN).
func hitTaskLimit(stderr []byte) bool {
	return bytes.Contains(stderr, []byte("RuntimeError: can't start new thread")) ||
		bytes.Contains(stderr, []byte("[Errno 11] Resource temporarily unavailable"))
}

// hitFileSize reports whether a failed job ran into RLIMIT_FSIZE. CPython
// ignores SIGXFSZ, so such a job just fails with EFBIG. A file at the limit
// in the host-side /query or repository view shows it; for files elsewhere
// only CPython's report of EFBIG on stderr does.
func (w *Workspace) hitFileSize(limit int64, stderr []byte) bool {
	if w.FileAtLimit(limit) != "" {
		return true
	}
	return bytes.Contains(stderr, []byte("[Errno 27] File too large"))
}
