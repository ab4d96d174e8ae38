package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// testRootFS is the rootfs built once for the package's tests, testRoot
// its directory and testRootDigest its digest at build time.
var (
	testRootFS               *isolatetest.RootFS
	testRoot, testRootDigest string
)

// probed is a runtime probed once by TestMain; other runtimes reuse its
// platform choice so that each test does not pay the KVM probe deadline.
var probed *Runtime

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	return isolatetest.WithRootFS("awf-gvisor-rootfs-", func(r *isolatetest.RootFS) int {
		testRootFS, testRoot, testRootDigest = r, r.Dir, r.Digest
		return runProbed(m)
	})
}

// runProbed probes a runtime once (probed) and runs the tests.
func runProbed(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	state, err := os.MkdirTemp("", "awf-gvisor-probe-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe state dir:", err)
		return 1
	}
	defer os.RemoveAll(state)
	defer removeTestCgroupParent()
	rt, err := New(isolate.HostConfig{RunID: "probe", StateDir: state, CgroupParent: "awf-test"})
	if err == nil {
		probed = rt.(*Runtime)
		err = probed.Probe(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gvisor probe:", err)
		return 1
	}
	return m.Run()
}

// newTestRuntime returns a probed runtime with a private state dir. Cleanup
// sweeps it and checks that nothing is left behind.
func newTestRuntime(t testing.TB) *Runtime {
	t.Helper()
	r := isolatetest.Open[*Runtime](t, New, isolate.HostConfig{CgroupParent: "awf-test"})
	r.platform, r.unimpl = probed.platform, probed.unimpl
	isolatetest.SweepAtCleanup(t, r, 30*time.Second, func() { requireNoLeftovers(t, r) })
	return r
}

// requireNoLeftovers closes r, which removes its rootfs image store, and
// checks that no workspace, mount, loop device or cgroup of r remains.
func requireNoLeftovers(t testing.TB, r *Runtime) {
	t.Helper()
	require.NoError(t, r.Close())
	isolatetest.RequireNoWorkspaceLeftovers(t, r.dir)
	m, err := filepath.Glob(filepath.Join(cgroupRoot, "*", r.parent, Name+"-"+r.runID+"-*"))
	require.NoError(t, err)
	m2, err := filepath.Glob(filepath.Join(cgroupRoot, r.parent, Name+"-"+r.runID+"-*"))
	require.NoError(t, err)
	require.Empty(t, append(m, m2...), "cgroups left")
	require.NoError(t, noRunscChildren(r))
}

// noRunscChildren fails when any process still runs with the state dir on
// its command line.
func noRunscChildren(r *Runtime) error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), r.dir) {
			return fmt.Errorf("process %s still runs: %q", e.Name(), strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return nil
}

// template returns a template over the test rootfs.
func template(t testing.TB, r *Runtime, repo string) isolate.Template {
	return isolate.Template{RunID: r.runID, RootFS: testRoot, Repo: repo, Limits: isolate.DefaultLimits(), Policy: isolatetest.Policy(t)}
}

// removeTestCgroupParent removes the tests' parent cgroup once it is empty.
func removeTestCgroupParent() {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", "awf-test"))
	dirs = append(dirs, filepath.Join(cgroupRoot, "awf-test"))
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}
