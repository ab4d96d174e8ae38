package verify

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/docker"
)

// otherRuntimeProbes is the subset run in the slower backends: enough to
// prove that the battery, the per-runtime N/A rules and the leftover checks
// work there, within the test time budget.
var otherRuntimeProbes = []string{
	"ctl/python", "ctl/repo-view", "net/interfaces", "priv/ids", "priv/caps", "priv/no-new-privs",
	"priv/seccomp-mode", "priv/unshare-userns", "fs/write-root", "limit/timeout", "filter/",
	"fs/host-counters", "fs/proc-inode-counter",
}

func runOther(t *testing.T, name string, h isolate.HostConfig) map[string]Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Runtimes: []string{name}, Required: []string{name}, RootFS: testRootFS,
		Probes: otherRuntimeProbes, Host: h, Environ: []string{}})
	require.NoError(t, err)
	rr := rep.Runtimes[0]
	require.NotEqual(t, Blocked, rr.Status, "%s is installed but BLOCKED: %s", name, rr.Reason)
	got := map[string]Result{}
	for _, r := range rr.Results {
		got[r.ID] = r
		t.Logf("%-7s %-22s %-6s %s", r.Status, r.ID, r.Path, r.Evidence)
		if r.Kind != "" {
			assert.Equal(t, PathPooled, r.Path, "%s in %s ran in a sandbox the warm pool prepared ahead", r.ID, name)
		}
	}
	for _, id := range []string{"ctl/python", "ctl/repo-view", "net/interfaces", "priv/ids", "priv/unshare-userns", "fs/write-root", "limit/timeout",
		"leftover/processes", "leftover/cgroups", "leftover/mounts", "leftover/state", "fs/seed-unchanged"} {
		assert.Equal(t, Pass, got[id].Status, "%s in %s: %s", id, name, got[id].Evidence)
	}
	return got
}

// TestGVisorBattery runs the subset in gVisor. The loaded-filter check is
// N/A there, with its reason.
func TestGVisorBattery(t *testing.T) {
	if _, err := exec.LookPath("runsc"); err != nil {
		t.Skip("BLOCKED: runsc is not installed on this host; the gvisor runtime cannot be verified here")
	}
	got := runOther(t, "gvisor", isolate.HostConfig{})
	assert.Equal(t, NotApplicable, got["filter/loaded"].Status, got["filter/loaded"].Evidence)
	assert.Equal(t, Pass, got["filter/denylist"].Status, got["filter/denylist"].Evidence)
	// The Sentry's own /proc and /sys: readable, but nothing there is the host's.
	assert.Equal(t, Warn, got["fs/host-counters"].Status, got["fs/host-counters"].Evidence)
	assert.Equal(t, Pass, got["fs/proc-inode-counter"].Status, got["fs/proc-inode-counter"].Evidence)
}

// TestDockerBattery runs the subset through the Docker Engine that the
// Makefile starts for the tests (AWF_TEST_DOCKER_SOCKET).
func TestDockerBattery(t *testing.T) {
	sock := os.Getenv("AWF_TEST_DOCKER_SOCKET")
	if sock == "" {
		if _, err := exec.LookPath("dockerd"); err != nil {
			t.Skip("BLOCKED: dockerd is not installed on this host; the docker runtime cannot be verified here")
		}
		// The engine is installed, so a missing daemon is a set-up fault.
		t.Fatal("AWF_TEST_DOCKER_SOCKET is not set: start a private dockerd with tests/setup/dockerd.sh start and export it (make test does)")
	}
	if _, err := docker.Info(context.Background(), sock); err != nil {
		t.Fatalf("AWF_TEST_DOCKER_SOCKET=%s is set but no Engine answers: %v", sock, err)
	}
	got := runOther(t, "docker", isolate.HostConfig{DockerSocket: sock})
	assert.Equal(t, Pass, got["filter/loaded"].Status, got["filter/loaded"].Evidence)
	assert.Equal(t, Pass, got["fs/host-counters"].Status, "the Engine applies every mask: %s", got["fs/host-counters"].Evidence)
	// A declared residual: runc 1.1 needs /proc in the container, and procfs
	// numbers its inodes from the host-wide counter. It is a WARN that
	// says so, never a PASS.
	assert.Equal(t, Warn, got["fs/proc-inode-counter"].Status, got["fs/proc-inode-counter"].Evidence)
	assert.Contains(t, got["fs/proc-inode-counter"].Evidence, "declared residual")
}

// TestSbxAlwaysBlocked uses the real sbx backend: it must be BLOCKED with
// every missing control listed, and required it fails the run.
func TestSbxAlwaysBlocked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Runtimes: []string{"sbx"}, Required: []string{"sbx"}, RootFS: testRootFS,
		Probes: []string{"ctl/python"}, Environ: []string{}})
	require.NoError(t, err)
	rr := rep.Runtimes[0]
	assert.Equal(t, Blocked, rr.Status)
	for _, c := range SbxMissingControls() {
		assert.Contains(t, rr.Reason, c)
	}
	assert.False(t, rep.OK)
}
