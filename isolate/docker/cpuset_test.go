package docker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestSandboxCPUs runs a container pinned to the host's last CPU (as awf
// run pins it, away from the agent's CPUs) and checks what the script sees.
func TestSandboxCPUs(t *testing.T) {
	cpus := isolatetest.LastCPU(t)

	r := newTestRuntime(t)
	r.cpus = cpus
	o := run(t, r, template(t, r, ""), `import json, os
allowed = [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith("Cpus_allowed_list:")][0]
open("/query/out", "w").write(json.dumps([allowed, sorted(os.sched_getaffinity(0))]))
`)
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.JSONEq(t, `["`+cpus+`", [`+cpus+`]]`, string(o.Output))
}
