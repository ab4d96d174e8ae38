package gvisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/rootfs"
)

// testRoot is the rootfs built once for the package's tests, and
// testRootDigest its digest at build time.
var testRoot, testRootDigest string

// probed is a runtime probed once by TestMain; other runtimes reuse its
// platform choice so that each test does not pay the KVM probe deadline.
var probed *Runtime

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "awf-gvisor-rootfs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rootfs temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	testRoot = filepath.Join(dir, "root")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if testRootDigest, err = rootfs.Build(ctx, rootfs.Options{Out: testRoot}); err != nil {
		fmt.Fprintln(os.Stderr, "rootfs build:", err)
		return 1
	}
	state, err := os.MkdirTemp("", "awf-gvisor-probe-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe state dir:", err)
		return 1
	}
	defer os.RemoveAll(state)
	defer removeTestCgroupParent()
	if probed, err = newRuntime(isolate.HostConfig{RunID: "probe", StateDir: state, CgroupParent: "awf-test"}); err == nil {
		err = probed.Probe(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gvisor probe:", err)
		return 1
	}
	return m.Run()
}

func randomID(t testing.TB) string {
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// newTestRuntime returns a probed runtime with a private state dir. Cleanup
// sweeps it and checks that nothing is left behind.
func newTestRuntime(t testing.TB) *Runtime {
	t.Helper()
	state := t.TempDir()
	r, err := newRuntime(isolate.HostConfig{RunID: randomID(t), StateDir: state, CgroupParent: "awf-test"})
	require.NoError(t, err)
	r.platform, r.unimpl = probed.platform, probed.unimpl
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, r.Sweep(ctx))
		requireNoLeftovers(t, r)
	})
	return r
}

// requireNoLeftovers closes r, which removes its rootfs image store, and
// checks that no workspace, mount, loop device or cgroup of r remains.
func requireNoLeftovers(t testing.TB, r *Runtime) {
	t.Helper()
	require.NoError(t, r.Close())
	loops, err := workspace.LoopDevicesOf(r.dir)
	require.NoError(t, err)
	require.Empty(t, loops, "loop devices left")
	names, err := os.ReadDir(r.dir)
	if err == nil {
		require.Empty(t, names, "workspaces left in %s", r.dir)
	}
	mi, err := os.ReadFile("/proc/thread-self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mi), r.dir, "mounts left below the state dir")
	m, err := filepath.Glob(filepath.Join(cgroupRoot, "*", r.parent, Name+"-"+r.runID+"-*"))
	require.NoError(t, err)
	m2, err := filepath.Glob(filepath.Join(cgroupRoot, r.parent, Name+"-"+r.runID+"-*"))
	require.NoError(t, err)
	require.Empty(t, append(m, m2...), "cgroups left")
	out, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	_ = out
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

// testPolicy returns the project's default seccomp policy.
func testPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := policy.Default()
	require.NoError(t, err, "the default seccomp policy must load")
	return p
}

// template returns a template over the test rootfs.
func template(t testing.TB, r *Runtime, repo string) isolate.Template {
	return isolate.Template{RunID: r.runID, RootFS: testRoot, Repo: repo, Limits: isolate.DefaultLimits(), Policy: testPolicy(t)}
}

// removeTestCgroupParent removes the tests' parent cgroup once it is empty.
func removeTestCgroupParent() {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", "awf-test"))
	dirs = append(dirs, filepath.Join(cgroupRoot, "awf-test"))
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}
