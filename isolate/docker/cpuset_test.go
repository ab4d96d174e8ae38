package docker

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
)

// TestSandboxCPUs runs a container pinned to the host's last CPU (as awf
// run pins it, away from the agent's CPUs) and checks what the script sees.
func TestSandboxCPUs(t *testing.T) {
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	require.GreaterOrEqual(t, set.Count(), 2, "CPU separation needs a host with two or more CPUs")
	last := 0
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			last = i
		}
	}
	cpus := strconv.Itoa(last)

	r := newTestRuntime(t)
	r.cpus = cpus
	o := run(t, r, template(t, r, ""), `import json, os
allowed = [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith("Cpus_allowed_list:")][0]
open("/query/out", "w").write(json.dumps([allowed, sorted(os.sched_getaffinity(0))]))
`)
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.JSONEq(t, `["`+cpus+`", [`+cpus+`]]`, string(o.Output))
}
