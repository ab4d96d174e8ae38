package direct_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// cpusScript reports the CPUs the sandbox may run on, as sched_getaffinity
// returns them. The sandbox has no /proc: the kernel's Cpus_allowed_list is
// read from the host (runWatched).
const cpusScript = `import json, os
open("/query/out", "w").write(json.dumps(sorted(os.sched_getaffinity(0))))
`

// TestSandboxCPUs runs a sandbox pinned to the host's last CPU (as awf run
// pins it, away from the agent's CPUs) and checks what the script sees.
func TestSandboxCPUs(t *testing.T) {
	cpus := isolatetest.LastCPU(t)
	e := newEnvWith(t, isolate.HostConfig{SandboxCPUs: cpus})
	var job map[string]any
	o := e.runWatched(t, e.template(t, ""), cpusScript, &job)
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.JSONEq(t, `[`+cpus+`]`, string(o.Output))
	assert.Equal(t, cpus, job["Cpus_allowed_list"])
}
