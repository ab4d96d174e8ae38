package gvisor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace"
)

// TestRenderingMatchesDescription writes the bundle a job would run from
// and compares every control of the drift table, read back from its
// config.json, with the description, allowing only gvisor's declared
// deviations.
func TestRenderingMatchesDescription(t *testing.T) {
	for i, rc := range isolatetest.RenderCases(t, "/root-mount", "/seed") {
		tpl, d := rc.Template, rc.Desc
		ws := &workspace.Workspace{Dir: "/state/ws", Journal: workspace.Journal{Repo: tpl.Repo}}
		spec, err := buildSpec(bundleSpec{desc: d, rootFS: "/state/ws/root", ws: ws, cgroup: "awf/x", runID: "render", invID: "inv", sandbox: "sb"})
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "bundle")
		require.NoError(t, writeBundle(dir, spec))
		raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
		require.NoError(t, err)
		var got specs.Spec
		require.NoError(t, json.Unmarshal(raw, &got), "bundle %d", i)
		isolatetest.Compare(t, Name, isolatetest.ControlsOf(d), isolatetest.ControlsOf(&got))
		// What the deviations table says, and nothing else.
		assert.Empty(t, got.Linux.ReadonlyPaths)
		assert.Empty(t, got.Linux.Devices)
		assert.Equal(t, "/proc", got.Mounts[0].Destination, "the Sentry's /proc")
		assert.Equal(t, d.Process.Args, got.Process.Args)
		assert.Equal(t, d.Process.User, got.Process.User)
		assert.Equal(t, d.Linux.Namespaces, got.Linux.Namespaces)
		assert.Equal(t, d.Linux.Resources.Memory, got.Linux.Resources.Memory)
		assert.Equal(t, d.Linux.Resources.CPU, got.Linux.Resources.CPU)
		assert.Contains(t, got.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: uint64(tpl.Limits.Pids), Soft: uint64(tpl.Limits.Pids)})
		for _, rl := range d.Process.Rlimits {
			assert.Contains(t, got.Process.Rlimits, rl)
		}
	}
}
