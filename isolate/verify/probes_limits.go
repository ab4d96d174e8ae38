package verify

import (
	"fmt"
	"time"

	"github.com/awf-project/awf/isolate"
)

// Limit probe sizes. They are small so the battery stays fast; each probe
// caps its own work so that a missing limit ends in a bounded FAIL rather
// than a host-wide resource exhaustion.
const (
	probeMemoryBytes = 64 << 20  // memory limit for the memory bomb
	bombCapBytes     = 512 << 20 // the bomb stops here and reports no OOM
	probePids        = 16        // pids limit for the thread bomb
	bombCapThreads   = 256       // the bomb stops here and reports no limit
	probeFileSize    = 1 << 20   // RLIMIT_FSIZE for the large-write probes
	probeNoFile      = 64        // RLIMIT_NOFILE for the descriptor probe
	probeTmpfsBytes  = 4 << 20   // /tmp and /query size for the fill probe
	floodBytes       = 64 << 20  // bytes the flood probe writes to stdout and stderr
)

// kindCheck passes when the outcome is of the wanted kind.
func kindCheck(want isolate.Kind, what string) func(c *probeCtx) (Status, string) {
	return func(c *probeCtx) (Status, string) {
		if c.out.Kind == want {
			return Pass, fmt.Sprintf("%s: outcome %s (%s)", what, c.out.Kind, c.out.Detail)
		}
		if c.out.Kind == isolate.KindOK {
			return Fail, fmt.Sprintf("no %s: the script finished normally and answered %s", what, c.answerText())
		}
		ev := fmt.Sprintf("want outcome %s, got %s (%s)", want, c.out.Kind, c.out.Detail)
		if tail := stderrTail(c.out.Stderr); tail != "" {
			ev += "; stderr: " + tail
		}
		return Fail, ev
	}
}

// limitProbes check that each resource limit holds and is reported with its
// typed outcome.
func limitProbes() []Probe {
	return inGroup("limits", []Probe{
		kindProbe("limit/memory", "Allocates and touches 8 MiB blocks under a 64 MiB memory limit (stops at 512 MiB).",
			"The memory limit does not hold or is not reported as oom.", isolate.KindOOM, "memory limit",
			func(l *isolate.Limits) { l.MemoryBytes = probeMemoryBytes; l.Wall = 20 * time.Second }, sObj("allocated_mib", sInt(0, 4096))),
		kindProbe("limit/pids", "Starts threads (the sandbox's fork) until creation fails, under a pids limit of 16 (stops at 256).",
			"The pids limit does not hold or is not reported as pids-limit: a fork bomb would exhaust the host.", isolate.KindPidsLimit, "pids limit",
			func(l *isolate.Limits) { l.Pids = probePids; l.Wall = 20 * time.Second }, sObj("threads", sInt(0, 4096))),
		kindProbe("limit/fsize", "Writes 2 MiB to one file in /query/repo under a 1 MiB file-size limit and lets the error end the script.",
			"RLIMIT_FSIZE does not hold, or a script that hits it is not reported as file-size-limit.", isolate.KindFileSizeLimit, "file-size limit",
			func(l *isolate.Limits) { l.FileSizeBytes = probeFileSize }, sObj("written", sBool)),
		withLimits(wantProbe("limit/fsize-errno", "Writes 2 MiB to one file in /query/repo with Python's default SIGXFSZ handling (ignored): the write must fail with EFBIG at 1 MiB.",
			"RLIMIT_FSIZE does not hold for the repository view.", sObj("err", sErrno, "within_limit", sBool), `{"err":"EFBIG","within_limit":true}`),
			func(l *isolate.Limits) { l.FileSizeBytes = probeFileSize }),
		withLimits(wantProbe("limit/tmpfs-fill", "Fills /tmp and /query (4 MiB each) with 256 KiB files until the write fails.",
			"A tmpfs is not size-capped: the script could fill host memory.", sObj("tmp", sErrno, "tmp_within", sBool, "query", sErrno, "query_within", sBool),
			`{"tmp":"ENOSPC","tmp_within":true,"query":"ENOSPC","query_within":true}`),
			func(l *isolate.Limits) { l.TmpTmpfsBytes = probeTmpfsBytes; l.QueryTmpfsBytes = probeTmpfsBytes }),
		withLimits(wantProbe("limit/nofile", "Opens /dev/null until it fails, under RLIMIT_NOFILE 64 (stops at 4096).",
			"The descriptor limit does not hold.", sObj("err", sErrno, "within_limit", sBool), `{"err":"EMFILE","within_limit":true}`),
			func(l *isolate.Limits) { l.NoFile = probeNoFile }),
		kindProbe("limit/timeout", "Spins the CPU forever under a 3 s wall-clock deadline.",
			"The deadline does not stop a runaway script, or is not reported as timeout.", isolate.KindTimeout, "wall-clock deadline",
			func(l *isolate.Limits) { l.Wall = 3 * time.Second }, sObj("done", sBool)),
		{
			ID:     "limit/stdout-flood",
			Title:  "Writes 64 MiB to stdout and to stderr, then answers: the broker must drain and discard it, keeping only a bounded capture.",
			OnFail: "Output floods block the script or grow the broker's memory.",
			limits: func(l *isolate.Limits) { l.Wall = 20 * time.Second },
			schema: sObj("flooded_mib", sInt(0, 1024)),
			check: func(c *probeCtx) (Status, string) {
				capb := c.limits.CaptureBytes
				if c.num("flooded_mib") != floodBytes>>20 {
					return Fail, fmt.Sprintf("the script wrote only %d MiB", c.num("flooded_mib"))
				}
				if int64(len(c.out.Stdout)) > capb || int64(len(c.out.Stderr)) > capb {
					return Fail, fmt.Sprintf("captured %d bytes of stdout and %d of stderr, above the %d-byte cap", len(c.out.Stdout), len(c.out.Stderr), capb)
				}
				return Pass, fmt.Sprintf("%d MiB each way drained in %v; kept %d+%d bytes (cap %d)",
					floodBytes>>20, c.out.Timings.Run.Round(time.Millisecond), len(c.out.Stdout), len(c.out.Stderr), capb)
			},
			example: `{"flooded_mib":64}`,
		},
		kindProbe("limit/output-too-large", "Writes 64 KiB to /query/out, above the 8 KiB output cap.",
			"An oversized answer is accepted or read past the cap.", isolate.KindOutputTooLarge, "output cap", nil, sBool),
		{
			ID:     "limit/output-symlink",
			Title:  "Makes /query/out a symlink to a file that holds a valid answer.",
			OnFail: "The broker follows links out of /query when it reads the answer.",
			schema: sObj("followed", sBool),
			check: func(c *probeCtx) (Status, string) {
				if oneOf(string(c.out.Kind), string(isolate.KindOutputInvalid), string(isolate.KindOutputMissing)) {
					return Pass, fmt.Sprintf("the link was not followed: outcome %s", c.out.Kind)
				}
				if c.out.Kind == isolate.KindSeccompKill && c.lastStep() == "symlink" {
					return Pass, "symlink is denied by seccomp"
				}
				if c.out.Kind == isolate.KindOK && !c.flag("followed") {
					return Pass, "symlink creation is denied in /query"
				}
				return Fail, fmt.Sprintf("want output-invalid, got %s (%s)", c.out.Kind, c.answerText())
			},
			exampleKind: isolate.KindOutputInvalid,
		},
	})
}

// answerText is the whole answer or a placeholder (the text table shortens it).
func (c *probeCtx) answerText() string {
	if c.answer == nil {
		return "no answer"
	}
	return string(c.out.Output)
}
