package docker

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/hostview"
	"github.com/awf-project/awf/isolate/workspace"
)

// maskReader lists every path of PATHS that is readable with content inside
// the container: a non-empty file that is not the /dev/null of a mask, or a
// non-empty directory.
const maskReader = `import json, os, stat
PATHS = %s
def content(p):
    try:
        if os.path.isdir(p):
            return bool(os.listdir(p))
        with open(p, "rb") as f:
            if stat.S_ISCHR(os.fstat(f.fileno()).st_mode):
                return False
            return bool(f.read(1))
    except OSError:
        return False
open("/query/out", "w").write(json.dumps({"readable": [p for p in PATHS if content(p)], "stat": os.path.exists("/proc/stat")}))
`

// TestEngineAppliesEveryMask runs a container and reads, from inside, every
// path the backend asks the Engine to mask: none may show content.
func TestEngineAppliesEveryMask(t *testing.T) {
	r := newTestRuntime(t)
	paths, err := json.Marshal(hostview.SandboxMaskPaths())
	require.NoError(t, err)
	o := run(t, r, template(t, r, ""), fmt.Sprintf(maskReader, paths))
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	var got struct {
		Readable []string `json:"readable"`
		Stat     bool     `json:"stat"`
	}
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Empty(t, got.Readable, "host-wide paths readable inside the container")
	assert.True(t, got.Stat, "/proc/stat exists, masked: the reader looked at the real paths")
}

// TestBuildCreateMasksHostView checks the rendering: the container masks
// exactly the one list.
func TestBuildCreateMasksHostView(t *testing.T) {
	d, err := isolate.Describe(isolate.Template{Limits: isolate.DefaultLimits(), Weaken: isolate.Weakening{NoSeccomp: true}}, isolate.Job{}, isolate.HostConfig{})
	require.NoError(t, err)
	b, err := buildCreate(containerSpec{desc: d, ws: &workspace.Workspace{Dir: "/state/ws"}})
	require.NoError(t, err)
	assert.Equal(t, hostview.SandboxMaskPaths(), b.HostConfig.MaskedPaths)
}
