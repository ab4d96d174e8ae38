package verify

import (
	"fmt"
	"time"
)

// controlProbes prove that the sandbox works at all, so that a blocked
// attack elsewhere is not just a broken sandbox.
func controlProbes() []Probe {
	return []Probe{
		{
			ID: "ctl/python", Group: "control",
			Title:   "The interpreter starts, runs in /query as its working directory, and writes an answer.",
			OnFail:  "The sandbox cannot run a query at all; every other verdict is unproven.",
			schema:  sObj("ran", sBool, "cwd", sBool),
			check:   checkEqual(map[string]any{"ran": true, "cwd": true}),
			example: `{"ran":true,"cwd":true}`,
		},
		{
			ID: "ctl/repo-view", Group: "control",
			Title:  "The seed is visible at /query/repo with its content, and a new file can be created at its top.",
			OnFail: "Queries would not see the repository, or could not use it as a working tree.",
			schema: sObj("marker", sBool, "entries", sInt(0, 64), "create", sErrno),
			check: func(c *probeCtx) (Status, string) {
				want := map[string]any{"marker": true, "entries": int64(c.fx.seedEntries), "create": "ok"}
				return checkEqual(want)(c)
			},
			example: `{"marker":true,"entries":3,"create":"ok"}`,
		},
		{
			ID: "ctl/repo-modify", Group: "control",
			Title:   "Appends to an existing seed file, deletes one, and creates a file in a seed subdirectory, through the private view.",
			OnFail:  "The view is not a usable working tree: scripts cannot change the files they were given (for example git operations fail).",
			schema:  errnoFields("modify", "subdir", "delete"),
			check:   checkEqual(map[string]any{"modify": "ok", "subdir": "ok", "delete": "ok"}),
			example: `{"modify":"ok","subdir":"ok","delete":"ok"}`,
		},
		{
			ID: "ctl/writable-areas", Group: "control",
			Title:   "/query and /tmp are writable by the script.",
			OnFail:  "Scripts cannot write their answer or scratch files.",
			schema:  errnoFields("query", "tmp"),
			check:   checkEqual(map[string]any{"query": "ok", "tmp": "ok"}),
			example: `{"query":"ok","tmp":"ok"}`,
		},
		{
			ID: "ctl/threads", Group: "control",
			Title:   "Threads work and the standard library imports (json, hashlib, re).",
			OnFail:  "Ordinary stdlib scripts would fail; the policy or limits are too tight.",
			schema:  sObj("threads", sInt(0, 16), "re", sBool),
			check:   checkEqual(map[string]any{"threads": int64(4), "re": true}),
			example: `{"threads":4,"re":true}`,
		},
		{
			ID: "ctl/ctypes", Group: "control",
			Title:   "ctypes can make a harmless raw system call (getpid), so the privilege probes' raw calls are meaningful.",
			OnFail:  "The privilege probes cannot attribute a failure to the attacked call; their verdicts are unproven.",
			schema:  errnoFields("getpid"),
			check:   checkEqual(map[string]any{"getpid": "ok"}),
			example: `{"getpid":"ok"}`,
		},
		{
			ID: "ctl/plant", Group: "control",
			Title:   "Leaves marker files in /query, /query/repo and /tmp for fs/earlier-invocations to look for.",
			OnFail:  "The writable areas do not work; fs/earlier-invocations is unproven.",
			schema:  errnoFields("query", "repo", "tmp"),
			check:   checkEqual(map[string]any{"query": "ok", "repo": "ok", "tmp": "ok"}),
			example: `{"query":"ok","repo":"ok","tmp":"ok"}`,
		},
	}
}

// defaultProbeWall bounds ordinary probes; limit probes set their own.
const defaultProbeWall = 20 * time.Second

// stepEvidence explains a seccomp kill in terms of the step it hit.
func stepEvidence(c *probeCtx) string {
	return fmt.Sprintf("killed by seccomp (%s) at step %q: the call is denied", c.out.Signal, c.lastStep())
}
