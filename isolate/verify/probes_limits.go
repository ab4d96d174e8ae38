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
	return []Probe{
		{
			ID: "limit/memory", Group: "limits",
			Title:       "Allocates and touches 8 MiB blocks under a 64 MiB memory limit (stops at 512 MiB).",
			OnFail:      "The memory limit does not hold or is not reported as oom.",
			limits:      func(l *isolate.Limits) { l.MemoryBytes = probeMemoryBytes; l.Wall = 20 * time.Second },
			schema:      sObj("allocated_mib", sInt(0, 4096)),
			check:       kindCheck(isolate.KindOOM, "memory limit"),
			exampleKind: isolate.KindOOM,
		},
		{
			ID: "limit/pids", Group: "limits",
			Title:       "Starts threads (the sandbox's fork) until creation fails, under a pids limit of 16 (stops at 256).",
			OnFail:      "The pids limit does not hold or is not reported as pids-limit: a fork bomb would exhaust the host.",
			limits:      func(l *isolate.Limits) { l.Pids = probePids; l.Wall = 20 * time.Second },
			schema:      sObj("threads", sInt(0, 4096)),
			check:       kindCheck(isolate.KindPidsLimit, "pids limit"),
			exampleKind: isolate.KindPidsLimit,
		},
		{
			ID: "limit/fsize", Group: "limits",
			Title:       "Writes 2 MiB to one file in /query/repo under a 1 MiB file-size limit and lets the error end the script.",
			OnFail:      "RLIMIT_FSIZE does not hold, or a script that hits it is not reported as file-size-limit.",
			limits:      func(l *isolate.Limits) { l.FileSizeBytes = probeFileSize },
			schema:      sObj("written", sBool),
			check:       kindCheck(isolate.KindFileSizeLimit, "file-size limit"),
			exampleKind: isolate.KindFileSizeLimit,
		},
		{
			ID: "limit/fsize-errno", Group: "limits",
			Title:   "Writes 2 MiB to one file in /query/repo with Python's default SIGXFSZ handling (ignored): the write must fail with EFBIG at 1 MiB.",
			OnFail:  "RLIMIT_FSIZE does not hold for the repository view.",
			limits:  func(l *isolate.Limits) { l.FileSizeBytes = probeFileSize },
			schema:  sObj("err", sErrno, "within_limit", sBool),
			check:   checkEqual(map[string]any{"err": "EFBIG", "within_limit": true}),
			example: `{"err":"EFBIG","within_limit":true}`,
		},
		{
			ID: "limit/tmpfs-fill", Group: "limits",
			Title:   "Fills /tmp and /query (4 MiB each) with 256 KiB files until the write fails.",
			OnFail:  "A tmpfs is not size-capped: the script could fill host memory.",
			limits:  func(l *isolate.Limits) { l.TmpTmpfsBytes = probeTmpfsBytes; l.QueryTmpfsBytes = probeTmpfsBytes },
			schema:  sObj("tmp", sErrno, "tmp_within", sBool, "query", sErrno, "query_within", sBool),
			check:   checkEqual(map[string]any{"tmp": "ENOSPC", "tmp_within": true, "query": "ENOSPC", "query_within": true}),
			example: `{"tmp":"ENOSPC","tmp_within":true,"query":"ENOSPC","query_within":true}`,
		},
		{
			ID: "limit/nofile", Group: "limits",
			Title:   "Opens /dev/null until it fails, under RLIMIT_NOFILE 64 (stops at 4096).",
			OnFail:  "The descriptor limit does not hold.",
			limits:  func(l *isolate.Limits) { l.NoFile = probeNoFile },
			schema:  sObj("err", sErrno, "within_limit", sBool),
			check:   checkEqual(map[string]any{"err": "EMFILE", "within_limit": true}),
			example: `{"err":"EMFILE","within_limit":true}`,
		},
		{
			ID: "limit/timeout", Group: "limits",
			Title:       "Spins the CPU forever under a 3 s wall-clock deadline.",
			OnFail:      "The deadline does not stop a runaway script, or is not reported as timeout.",
			limits:      func(l *isolate.Limits) { l.Wall = 3 * time.Second },
			schema:      sObj("done", sBool),
			check:       kindCheck(isolate.KindTimeout, "wall-clock deadline"),
			exampleKind: isolate.KindTimeout,
		},
		{
			ID: "limit/stdout-flood", Group: "limits",
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
		{
			ID: "limit/output-too-large", Group: "limits",
			Title:       "Writes 64 KiB to /query/out, above the 8 KiB output cap.",
			OnFail:      "An oversized answer is accepted or read past the cap.",
			schema:      sBool,
			check:       kindCheck(isolate.KindOutputTooLarge, "output cap"),
			exampleKind: isolate.KindOutputTooLarge,
		},
		{
			ID: "limit/output-symlink", Group: "limits",
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
	}
}

// answerText is the whole answer or a placeholder (the text table shortens it).
func (c *probeCtx) answerText() string {
	if c.answer == nil {
		return "no answer"
	}
	return string(c.out.Output)
}
