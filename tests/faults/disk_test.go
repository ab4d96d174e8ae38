package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillDisk writes path until its file system is full and returns how many
// bytes it took.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		require.NoError(t, err, "filling %s", path)
	}
}

// TestFullDiskUnderPrivateRoot: the file system of the private root (a
// 160 MiB tmpfs here, in the run's own mount namespace) fills up while the
// broker is ready. The query asked then gets a canonical envelope, its
// typed reason is in the audit log or, when even that could not be
// written, in the operator's log (never the agent's); once space is back,
// the next query is answered normally, the audit log is whole JSONL, and
// the run leaves nothing behind. On direct, gvisor and docker. The docker
// case runs a private Engine in that same mount namespace: an Engine in
// the host's could not see a private root on the run's own tmpfs, and a
// tmpfs over the host's private base would fill every other run of the
// host.
func TestFullDiskUnderPrivateRoot(t *testing.T) {
	for _, rt := range allRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			script := agentScript(t, "")
			g := newGates(script)
			body := "echo started\n" + g.wait(1) + queryLine(0) + "echo full\n" + g.wait(2) + queryLine(0) + "echo done\n"
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+body), 0o755))
			mountPrivate := "mkdir -p " + privateBase + "\nmount -t tmpfs -o size=160m,mode=0700 awf-faults-full " + privateBase
			cfg := ""
			var e *engine
			if rt == "docker" {
				e = newEngine(t)
				sh, err := filepath.Abs("../setup/dockerd.sh")
				require.NoError(t, err)
				// Started from the namespace's shell, the Engine (and the
				// containerd it starts) lives in that namespace; its output
				// goes to the operator's log, not the agent's.
				mountPrivate += "\nenv " + strings.Join(e.vars, " ") + " " + sh + " start >&2"
				cfg = configOn(t, rt, e.sock, 8, "public", "", 30)
			} else {
				cfg = configWith(t, rt, 8, "public", "", 30)
			}
			r := startRunPrivate(t, cfg, script, mountPrivate)
			id := r.runID(t)
			r.waitStdout(t, "started")
			filler := filepath.Join(filepath.Dir(privateDir(r.cmd.Process.Pid, id)), "filler")
			t.Logf("filled the private base with %d MiB", fillDisk(t, filler)>>20)
			g.open(t, 1)
			r.waitStdout(t, "full")
			require.NoError(t, os.Remove(filler))
			g.open(t, 2)
			require.Equal(t, 0, r.wait(t, 2*time.Minute), r.stderr.String())
			assertNothingLeft(t, id, time.Now())
			if e != nil {
				// The Engine keeps the run's mount namespace alive: nothing
				// of the run may be left in it either.
				assert.Empty(t, containers(t, e.sock, id), "containers of run %s left on the Engine", id)
				assert.Empty(t, engineProcs(e.tag), "container processes left under the Engine's cgroup parent")
				points, err := mountPoints(fmt.Sprintf("/proc/%d/mountinfo", e.pid(t)), id)
				require.NoError(t, err)
				for _, p := range points {
					t.Errorf("mount %s of run %s left in the Engine's namespace", p, id)
				}
				_, err = os.Lstat(privateDir(e.pid(t), id))
				assert.ErrorIs(t, err, os.ErrNotExist, "the run's private root is left in the Engine's namespace")
			}

			out := r.stdout.String()
			assertCanonical(t, out, "started", "full", "done")
			resp := queryResponses(out)
			require.Len(t, resp, 2)
			assert.Equal(t, okTrue, resp[1], "space is back: the next query is answered")
			recs := answered(audit(t, id)) // audit() fails on a torn line
			why := reasons(recs)
			t.Logf("agent saw %v; audit recorded %v", resp, why)
			require.NotEmpty(t, recs)
			assert.Equal(t, "invocation", why[len(why)-1])
			if len(recs) == 1 {
				assert.Contains(t, r.stderr.String(), "audit write failed",
					"the full-disk answer is neither in the audit log nor in the operator's log")
			} else {
				require.Len(t, recs, 2)
				if resp[0] == errorEnv {
					assert.NotEqual(t, "invocation", why[0])
				}
			}
			assert.NotContains(t, out, "no space", "the agent saw a diagnostic")
			assert.False(t, strings.Contains(out, "ENOSPC"))
		})
	}
}
