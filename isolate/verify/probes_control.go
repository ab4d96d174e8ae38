package verify

import (
	"fmt"
	"time"
)

// controlProbes prove that the sandbox works at all, so that a blocked
// attack elsewhere is not just a broken sandbox.
func controlProbes() []Probe {
	return inGroup("control", []Probe{
		wantProbe("ctl/python", "The interpreter starts, runs in /query as its working directory, and writes an answer.",
			"The sandbox cannot run a query at all; every other verdict is unproven.", sObj("ran", sBool, "cwd", sBool), `{"ran":true,"cwd":true}`),
		{
			ID:     "ctl/repo-view",
			Title:  "The seed is visible at /query/repo with its content, and a new file can be created at its top.",
			OnFail: "Queries would not see the repository, or could not use it as a working tree.",
			schema: sObj("marker", sBool, "entries", sInt(0, 64), "create", sErrno),
			check: func(c *probeCtx) (Status, string) {
				want := map[string]any{"marker": true, "entries": int64(c.fx.seedEntries), "create": "ok"}
				return checkEqual(want)(c)
			},
			example: `{"marker":true,"entries":3,"create":"ok"}`,
		},
		wantProbe("ctl/repo-modify", "Appends to an existing seed file, deletes one, and creates a file in a seed subdirectory, through the private view.",
			"The view is not a usable working tree: scripts cannot change the files they were given (for example git operations fail).",
			errnoFields("modify", "subdir", "delete"), `{"modify":"ok","subdir":"ok","delete":"ok"}`),
		wantProbe("ctl/writable-areas", "/query and /tmp are writable by the script.",
			"Scripts cannot write their answer or scratch files.", errnoFields("query", "tmp"), `{"query":"ok","tmp":"ok"}`),
		wantProbe("ctl/threads", "Threads work and the standard library imports (json, hashlib, re).",
			"Ordinary stdlib scripts would fail; the policy or limits are too tight.", sObj("threads", sInt(0, 16), "re", sBool), `{"threads":4,"re":true}`),
		wantProbe("ctl/ctypes", "ctypes can make a harmless raw system call (getpid), so the privilege probes' raw calls are meaningful.",
			"The privilege probes cannot attribute a failure to the attacked call; their verdicts are unproven.", errnoFields("getpid"), `{"getpid":"ok"}`),
		wantProbe("ctl/plant", "Leaves marker files in /query, /query/repo and /tmp for fs/earlier-invocations to look for.",
			"The writable areas do not work; fs/earlier-invocations is unproven.", errnoFields("query", "repo", "tmp"), `{"query":"ok","repo":"ok","tmp":"ok"}`),
	})
}

// defaultProbeWall bounds ordinary probes; limit probes set their own.
const defaultProbeWall = 20 * time.Second

// stepEvidence explains a seccomp kill in terms of the step it hit.
func stepEvidence(c *probeCtx) string {
	return fmt.Sprintf("killed by seccomp (%s) at step %q: the call is denied", c.out.Signal, c.lastStep())
}
