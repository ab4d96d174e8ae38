package docker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace"
)

// TestRenderingMatchesDescription builds a real workspace, renders the
// Engine's create request a job would send, and compares every control of
// the drift table with the description, allowing only docker's declared
// deviations. A bind's flags are those of its host mount (the API cannot
// set noexec, nosuid or nodev on a bind), so they are read with statfs.
func TestRenderingMatchesDescription(t *testing.T) {
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "f"), []byte("x"), 0o644))
	for i, rc := range isolatetest.RenderCases(t, testRoot, seed) {
		tpl, d := rc.Template, rc.Desc
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		parent := t.TempDir()
		ws, err := workspace.Create(ctx, parent, workspace.Journal{Backend: Name, RunID: "render", SandboxID: "sb", Name: "render-sb"}, tpl.Limits, tpl.Repo)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, workspace.Remove(context.Background(), ws.Dir)) })
		require.NoError(t, ws.WriteScript([]byte("pass\n")))
		tmp, err := ws.MountScratch("tmp", tpl.Limits.TmpTmpfsBytes)
		require.NoError(t, err)
		body, err := buildCreate(containerSpec{desc: d, image: "img", seccomp: "seccomp=x", ws: ws, tmp: tmp})
		require.NoError(t, err)
		require.NoError(t, checkBindFlags(d, body))
		// What the Engine receives, read back as it does.
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		var got createBody
		require.NoError(t, json.Unmarshal(raw, &got), "request %d", i)
		c := isolatetest.Controls{Hostname: got.Hostname, Env: got.Env, Mounts: map[string]isolate.MountFlags{}, MaskedPaths: got.HostConfig.MaskedPaths}
		for _, m := range got.HostConfig.Mounts {
			f, err := HostMountFlags(m.Source)
			require.NoError(t, err)
			if m.ReadOnly {
				f = isolate.MountFlags{ReadOnly: true} // runc's remount keeps only MS_RDONLY
			}
			c.Mounts[m.Target] = f
		}
		// The Engine mounts its private /dev/shm noexec, nosuid, nodev, of ShmSize.
		c.Mounts[isolate.DevShmDir] = isolate.MountFlags{NoExec: true, NoSuid: true, NoDev: true, Size: got.HostConfig.ShmSize}
		cancel()
		isolatetest.Compare(t, Name, isolatetest.ControlsOf(d), c)
		assert.Equal(t, d.Linux.ReadonlyPaths, got.HostConfig.ReadonlyPaths)
		assert.Equal(t, d.Process.Args, got.Cmd)
		assert.Equal(t, "65534:65534", got.User)
		assert.Equal(t, "1", got.HostConfig.CpusetCpus)
		assert.Equal(t, "none", got.HostConfig.NetworkMode)
	}
}
