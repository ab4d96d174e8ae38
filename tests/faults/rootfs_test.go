package faults

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRootFSRemovedMidRun: the run's sandbox root filesystem (a copy of
// the suite's, same digest) is removed after the first query, once the
// warm pool holds the sandbox it prepared, and verified, before that. That
// sandbox answers the next query; every sandbox prepared after the removal
// fails closed: the canonical error and an audit record of its own typed
// launch-failed, on every runtime. Never a sandbox on another root, never
// a hang. The run then ends normally and leaves nothing.
func TestRootFSRemovedMidRun(t *testing.T) {
	for _, rt := range allRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			dir := t.TempDir()
			rfs := filepath.Join(dir, "rootfs")
			out, err := exec.Command("cp", "-a", rootfsDir, rfs).CombinedOutput()
			require.NoError(t, err, "%s", out)
			script := agentScript(t, "")
			g := newGates(script)
			body := "echo started\n" + queryLine(0) + barrierLine + "echo one\n" + g.wait(1) + queryLine(0) + queryLine(0) + "echo done\n"
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+body), 0o755))
			r := startRun(t, configWith(t, rt, 8, "public", rfs, 30), script)
			id := r.runID(t)
			r.waitStdout(t, "one")
			require.NoError(t, os.RemoveAll(rfs))
			g.open(t, 1)
			require.Equal(t, 0, r.wait(t, 3*time.Minute), r.stderr.String())
			assertNothingLeftOn(t, rt, id, time.Now())

			stdout := r.stdout.String()
			assertCanonical(t, stdout, "started", "one", "done", barrierOut)
			resp := queryResponses(stdout)
			require.Len(t, resp, 3)
			assert.Equal(t, okTrue, resp[0])
			recs := answered(audit(t, id))
			why := reasons(recs)
			t.Logf("agent saw %v; audit recorded %v", resp, why)
			require.Len(t, recs, 4, "one audit record per answer, the barrier's included")
			why = append(why[:1], why[2:]...) // the barrier's
			assert.Equal(t, "invocation", why[0])
			// The warm pool's sandbox, prepared on the verified root before
			// its removal, answers; every runtime then fails closed.
			assert.Equal(t, []string{okTrue, errorEnv}, resp[1:])
			assert.Equal(t, []string{"invocation", "launch-failed"}, why[1:])
		})
	}
}
