package gvisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startNamed starts a process whose argument list has arg (as its argv[0])
// and kills it at cleanup.
func startNamed(t *testing.T, arg string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "300")
	cmd.Args = []string{arg, "300"}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// exited reports whether cmd's process has exited (a zombie not yet
// reaped counts).
func exited(cmd *exec.Cmd) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
	return err != nil || len(b) == 0
}

// TestReclaimContainer: reclaimContainer kills every process naming the
// container's runsc state root (and no other), then removes that root,
// without running runsc: a dead container's state goes at once, however
// late its dead processes are reaped.
func TestReclaimContainer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		procs int // processes naming the state root
	}{
		{"dead container", 0},
		{"live container", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "runsc")
			require.NoError(t, os.Mkdir(root, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(root, "c.state"), []byte("{}"), 0o600))
			var own []*exec.Cmd
			for range tc.procs {
				own = append(own, startNamed(t, "--root="+root))
			}
			// Another container's process, and one naming this root in
			// another flag: neither is this container's.
			other := startNamed(t, "--root="+root+"x")
			log := startNamed(t, "--log="+root)
			// runsc is not run: a path that cannot be executed.
			require.NoError(t, reclaimContainer(context.Background(), "/nonexistent/runsc", root, "c"))
			_, err := os.Stat(root)
			assert.ErrorIs(t, err, os.ErrNotExist, "runsc state left")
			for _, c := range own {
				assert.True(t, exited(c), "process %d of the container left", c.Process.Pid)
			}
			assert.False(t, exited(other), "another container's process was killed")
			assert.False(t, exited(log), "a process naming the root in another flag was killed")
		})
	}
}

// TestReclaimContainerFailsClosed: a process of the container that does
// not die (frozen by the cgroup v1 freezer, a SIGKILL to it stays pending:
// a process stuck in uninterruptible sleep) keeps the state, and the
// reclaim fails once ctx ends.
func TestReclaimContainerFailsClosed(t *testing.T) {
	const freezer = "/sys/fs/cgroup/freezer"
	_, err := os.Stat(filepath.Join(freezer, "cgroup.procs"))
	require.NoError(t, err, "FAIL: this test needs the cgroup v1 freezer at %s to make a process unkillable", freezer)
	dir := t.TempDir()
	root := filepath.Join(dir, "runsc")
	require.NoError(t, os.Mkdir(root, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "c.state"), []byte("{}"), 0o600))
	cg := filepath.Join(freezer, "awf-test-reclaim-"+strconv.Itoa(os.Getpid()))
	require.NoError(t, os.Mkdir(cg, 0o755))
	t.Cleanup(func() {
		assert.Eventually(t, func() bool { return os.Remove(cg) == nil }, 10*time.Second, 10*time.Millisecond, "freezer group %s left", cg)
	})
	c := startNamed(t, "--root="+root)
	// Before startNamed's kill and wait, which a frozen process would
	// block: thawed, it dies of its pending SIGKILL.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(cg, "freezer.state"), []byte("THAWED"), 0) })
	require.NoError(t, os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(c.Process.Pid)), 0))
	require.NoError(t, os.WriteFile(filepath.Join(cg, "freezer.state"), []byte("FROZEN"), 0))
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(cg, "freezer.state"))
		return strings.TrimSpace(string(b)) == "FROZEN"
	}, 10*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = reclaimContainer(ctx, "", root, "c")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not die")
	_, serr := os.Stat(filepath.Join(root, "c.state"))
	assert.NoError(t, serr, "the state of a container whose process lives was removed")
}
