package direct_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/rootfs"
)

func init() {
	// libcontainer re-executes this test binary as the container init.
	direct.InitIfRequested()
}

// testRootFS is the root filesystem every test in this package runs on.
var testRootFS string

// initialMntNS is the mount namespace of the main thread before any
// sandbox existed.
var initialMntNS string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(miniBroker())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "direct tests must run as root: they build real sandboxes")
		return 1
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/mnt", os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "read the main thread's mount namespace:", err)
		return 1
	}
	initialMntNS = ns
	return isolatetest.WithRootFS("awf-direct-rootfs-", func(r *isolatetest.RootFS) int {
		testRootFS = r.Dir
		code := m.Run()
		// No sandbox may ever write into the shared root filesystem.
		if _, err := rootfs.Verify(context.Background(), r.Dir, r.Digest); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: the sandboxes changed the root filesystem:", err)
			return 1
		}
		return code
	})
}

// newRunID returns a fresh run id.
func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// testEnv is one runtime with its own state dir.
type testEnv struct {
	rt    *direct.Runtime
	runID string
	state string
}

// newEnv opens a runtime and registers a cleanup that sweeps and closes
// it and checks that nothing it created is left.
func newEnv(t testing.TB) *testEnv {
	t.Helper()
	return newEnvWith(t, isolate.HostConfig{})
}

// newEnvWith is newEnv with h's other fields (RunID and StateDir are the
// test's).
func newEnvWith(t testing.TB, h isolate.HostConfig) *testEnv {
	t.Helper()
	e := &testEnv{runID: newRunID(), state: t.TempDir()}
	h.RunID, h.StateDir = e.runID, e.state
	rt, err := direct.Open(h)
	require.NoError(t, err)
	e.rt = rt
	isolatetest.SweepAtCleanup(t, rt, 30*time.Second, func() {
		require.NoError(t, rt.Close())
		assertNoLeftovers(t, e.runID, e.state)
	})
	return e
}

// template returns a full-control template over repo ("" = none).
func (e *testEnv) template(t testing.TB, repo string) isolate.Template {
	return isolate.Template{
		RunID:  e.runID,
		RootFS: testRootFS,
		Repo:   repo,
		Limits: isolate.DefaultLimits(),
		Policy: isolatetest.Policy(t),
	}
}

// prepared returns a fresh runtime (newEnv) with a sandbox prepared over
// repo ("" = none) and the context it was prepared in, which ends after a
// minute or with the test.
func prepared(t *testing.T, repo string) (*testEnv, context.Context, isolate.Sandbox) {
	t.Helper()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	sb, err := e.rt.Prepare(ctx, e.template(t, repo))
	require.NoError(t, err)
	return e, ctx, sb
}

// run executes script under tpl and returns the outcome.
func (e *testEnv) run(t testing.TB, tpl isolate.Template, script string) isolate.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "inv1", Script: []byte(script)}})
	t.Logf("outcome %s (exit %d %s): %s; timings %+v", o.Kind, o.ExitCode, o.Signal, o.Detail, o.Timings)
	e.assertIdle(t)
	return o
}

// assertIdle checks that no sandbox resource is left while the runtime is
// still open (only the read-only root binds and the repository view store
// with its noatime bind may stay).
func (e *testEnv) assertIdle(t testing.TB) {
	t.Helper()
	for _, d := range []string{"libct", "sb"} {
		ents, err := os.ReadDir(filepath.Join(e.state, d))
		require.NoError(t, err)
		require.Empty(t, names(ents), "state dir %s not empty", d)
	}
	ents, err := os.ReadDir(filepath.Join(e.state, "journal"))
	require.NoError(t, err)
	for _, n := range names(ents) {
		require.True(t, strings.HasPrefix(n, "root-") || strings.HasPrefix(n, "view-"), "journal entry %s left", n)
	}
	require.Empty(t, leftoverCgroups(t, e.runID), "cgroups left")
	require.Empty(t, leftoverProcs(t, e.runID), "processes left")
	for _, m := range mountsUnder(t, e.state) {
		require.True(t, strings.Contains(m, "/roots/") || strings.HasPrefix(m, filepath.Join(e.state, "views")+"/"), "mount %s left", m)
	}
}

// assertNoLeftovers checks that nothing of runID is left anywhere.
func assertNoLeftovers(t testing.TB, runID, state string) {
	t.Helper()
	for _, d := range []string{"libct", "sb", "journal", "roots", "views"} {
		ents, err := os.ReadDir(filepath.Join(state, d))
		require.NoError(t, err)
		require.Empty(t, names(ents), "state dir %s not empty", d)
	}
	require.Empty(t, mountsUnder(t, state), "mounts left")
	loops, err := workspace.LoopDevicesOf(state)
	require.NoError(t, err)
	require.Empty(t, loops, "loop devices left")
	require.Empty(t, leftoverCgroups(t, runID), "cgroups left")
	require.Empty(t, leftoverProcs(t, runID), "processes left")
}

func names(ents []os.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// leftoverCgroups lists cgroup directories of runID in any hierarchy.
func leftoverCgroups(t testing.TB, runID string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && strings.Contains(d.Name(), "awf-"+runID+"-") {
			out = append(out, p)
			return filepath.SkipDir
		}
		if d.IsDir() && strings.Count(strings.TrimPrefix(p, "/sys/fs/cgroup"), "/") > 3 {
			return filepath.SkipDir
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// leftoverProcs lists processes whose cgroup belongs to runID, each as its
// /proc/PID/stat line.
func leftoverProcs(t testing.TB, runID string) []string {
	t.Helper()
	var out []string
	for _, pid := range runProcs(t, runID) {
		stat, _ := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		out = append(out, strings.TrimSpace(string(stat)))
	}
	return out
}

// runProcs lists the pids (as in /proc) of the processes in runID's
// sandbox cgroups (awf-<run>-…).
func runProcs(t testing.TB, runID string) []string {
	t.Helper()
	var out []string
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(b), "awf-"+runID+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// mountsUnder lists mount points at or below dir.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			out = append(out, fs[4])
		}
	}
	return out
}

// decodeOut decodes a JSON /query/out.
func decodeOut(t testing.TB, o isolate.Outcome) map[string]any {
	t.Helper()
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	var m map[string]any
	require.NoError(t, json.Unmarshal(o.Output, &m), "output %q", o.Output)
	return m
}
