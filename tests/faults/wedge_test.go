package faults

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freezerV1 is the cgroup v1 freezer hierarchy the wedge uses.
const freezerV1 = "/sys/fs/cgroup/freezer"

// wedge is a test-owned cgroup v1 freezer group, FROZEN, holding processes
// moved out of a sandbox. A task frozen by the v1 freezer stays asleep in
// the kernel's refrigerator (ps shows D) and a SIGKILL sent to it stays
// pending until the group is thawed: to the runtime it is a sandbox stuck
// in uninterruptible sleep (a hung NFS or FUSE read, a wedged driver).
// Unlike a real wedge it can be undone, so the test can go on to prove the
// clean-up afterwards. awf's own cgroup handling never touches this group
// (a runtime that thaws its own freezer group before a kill, as
// libcontainer does, thaws only its own).
type wedge struct{ dir string }

func newWedge(t *testing.T) *wedge {
	t.Helper()
	_, err := os.Stat(filepath.Join(freezerV1, "freezer.state"))
	if err != nil {
		_, err = os.Stat(filepath.Join(freezerV1, "cgroup.procs"))
	}
	require.NoError(t, err, "FAIL: the wedge needs the cgroup v1 freezer at %s (this host mounts cgroups hybrid)", freezerV1)
	w := &wedge{dir: filepath.Join(freezerV1, wedgeName())}
	require.NoError(t, os.Mkdir(w.dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "freezer.state"), []byte("FROZEN"), 0))
	t.Cleanup(func() { w.release(t) })
	return w
}

// frozen waits until the kernel reports the group frozen.
func (w *wedge) frozen(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(w.dir, "freezer.state"))
		return strings.TrimSpace(string(b)) == "FROZEN"
	}, 10*time.Second, 10*time.Millisecond)
}

// release thaws the group (its tasks then die of their pending SIGKILL)
// and removes it once empty.
func (w *wedge) release(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(w.dir); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(w.dir, "freezer.state"), []byte("THAWED"), 0)
	assert.Eventually(t, func() bool { return os.Remove(w.dir) == nil }, 10*time.Second, 20*time.Millisecond, "wedge %s not emptied", w.dir)
}

// TestWedgedRuntime: mid-query, every process of the sandbox is made
// unkillable (wedge). awf still answers within its deadlines: the wedged
// query gets the canonical error and the audit records that its sandbox
// could not be reclaimed; the runtime then marks itself unusable, so the
// next query fails closed (canonical error, typed in the audit) instead of
// sharing the host with a sandbox that may still run. The run ends without
// hanging and does not report success. Once the wedge is undone, the next
// awf run's start-up sweep reclaims everything of the wedged run. On
// direct, gvisor and docker (on a private Engine: its container's
// processes are the ones wedged, and the sweep must also remove the
// container).
func TestWedgedRuntime(t *testing.T) {
	for _, rt := range allRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			var e *engine
			if rt == "docker" {
				// The Engine's cgroup parent is its own (newEngine): every
				// process under it is this case's.
				e = newEngine(t)
				e.script(t, "start")
			}
			// config is a config of runtime r, on the private Engine for
			// docker.
			config := func(r string, timeout int) string {
				if e != nil {
					return configOn(t, r, e.sock, 8, "public", "", timeout)
				}
				return configWith(t, r, 8, "public", "", timeout)
			}
			var id string
			forceReclaim(t, &id) // after the wedge's release below
			w := newWedge(t)
			script := "echo started\n" + queryLine(600) + queryLine(0) + "echo done\n"
			r := startRun(t, config(rt, 5), agentScript(t, script))
			id = r.runID(t)
			r.waitStdout(t, "started")
			// The wedged run keeps its root; until the wedge is undone no
			// other package's awf run may sweep it (see holdRoot).
			release := holdRoot(t, id)
			var victims func() []string
			if e != nil {
				// The container's processes live under the Engine's cgroup
				// parent, not in a cgroup named by the run: wait until its
				// interpreter runs (a process frozen before its exec would
				// wedge the Engine's start call instead, another case).
				victims = func() []string { return engineProcs(e.tag) }
				require.Eventually(t, func() bool {
					for _, p := range victims() {
						if strings.Contains(p, "python3") {
							return true
						}
					}
					return false
				}, 2*time.Minute, 10*time.Millisecond, "no container process of run %s", id)
			} else {
				victims = func() []string { return sandboxProcs(id) }
				waitSandbox(t, id)
			}
			var held []string
			for _, p := range victims() {
				pid, err := strconv.Atoi(strings.Fields(p)[0])
				require.NoError(t, err)
				if err := os.WriteFile(filepath.Join(w.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err == nil {
					held = append(held, p)
				}
			}
			require.NotEmpty(t, held, "no sandbox process could be wedged")
			w.frozen(t)
			t.Logf("wedged %d processes: %v", len(held), held)
			began := time.Now()
			code := r.wait(t, 12*time.Minute) // up to the last (600 s) bucket, and teardown
			t.Logf("awf run exited %d after %v; stderr:\n%s", code, time.Since(began).Round(time.Millisecond), r.stderr.String())
			assert.NotEqual(t, 0, code, "a run whose sandbox could not be reclaimed reported success")

			out := r.stdout.String()
			assertCanonical(t, out, "started", "done")
			resp := queryResponses(out)
			require.Len(t, resp, 2)
			assert.Equal(t, []string{errorEnv, errorEnv}, resp)
			recs := answered(audit(t, id))
			why := reasons(recs)
			t.Logf("audit recorded %v", why)
			require.Len(t, why, 2)
			// Wedged while starting (launch-failed: its start was abandoned)
			// or while running (timeout or cleanup-failed): typed, not an
			// answer.
			assert.NotEqual(t, "invocation", why[0], "the wedged query")
			assert.NotEqual(t, "invocation", why[1], "the runtime went on after a sandbox it could not reclaim")

			w.release(t)
			release()
			nextRT := "direct"
			if e != nil {
				nextRT = "docker"
			}
			next := startRun(t, config(nextRT, 30), agentScript(t, "echo started\n"))
			assert.Equal(t, 0, next.wait(t, 2*time.Minute), next.stderr.String())
			assertNothingLeft(t, id, time.Now())
			nid := next.runIDAfter(t)
			assertNothingLeft(t, nid, time.Now())
			if e != nil {
				assert.Empty(t, containers(t, e.sock, id), "containers of the wedged run %s left on the Engine", id)
				assert.Empty(t, containers(t, e.sock, nid))
				assert.Empty(t, engineProcs(e.tag), "container processes left under the Engine's cgroup parent")
			}
		})
	}
}
