package agentloop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestToolsUnderGVisor reruns the confinement tests inside gVisor, whose
// kernel has no openat2 (ENOSYS) and whose O_NOFOLLOW differs from Linux
// for directories: the tools must fall back to the component walk and
// still refuse every escape. It builds this package's tests static and
// runs them with `runsc do`.
func TestToolsUnderGVisor(t *testing.T) {
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("BLOCKED: runsc is not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "agentloop.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runsc, "--network=none", "--ignore-cgroups", "--root", filepath.Join(dir, "runsc-root"),
		"do", bin, "-test.count=1", "-test.v",
		"-test.run", "^(TestToolConfinement|TestToolMagicLinks|TestReadFile|TestListFiles|TestSearch|TestOpenat2Fallback)$")
	cmd.Env = append(os.Environ(), "AWF_AGENTLOOP_IN_GVISOR=1")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "\nPASS\n")
	require.Contains(t, string(out), "--- PASS: TestOpenat2Fallback")
	require.NotContains(t, string(out), "--- FAIL")
	require.NotContains(t, strings.ToLower(string(out)), "--- skip")
}

// TestOpenat2Fallback: on this kernel the tools use openat2; inside
// gVisor (the rerun above sets AWF_AGENTLOOP_IN_GVISOR), whose kernel
// release (4.4.0) predates openat2, they use the walk from the start,
// which is what makes the rerun test it.
func TestOpenat2Fallback(t *testing.T) {
	inGVisor := os.Getenv("AWF_AGENTLOOP_IN_GVISOR") != ""
	repo, err := OpenRepo(newSeed(t))
	require.NoError(t, err)
	defer repo.Close()
	_, err = repo.ListFiles(context.Background(), ".")
	require.NoError(t, err)
	require.Equal(t, inGVisor, repo.walk.Load(), "the walk is used exactly where the kernel has no openat2")
}

// TestHasOpenat2 pins the release test that keeps the loop from calling
// openat2 where the kernel cannot have it (gVisor's 4.4.0).
func TestHasOpenat2(t *testing.T) {
	for release, want := range map[string]bool{
		"4.4.0": false, "5.5.19": false, "5.6.0": true, "5.15.0-91-generic": true,
		"6.18.0": true, "10.0": true, "": true, "weird": true,
	} {
		require.Equal(t, want, hasOpenat2(release), release)
	}
}
