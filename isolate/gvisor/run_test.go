package gvisor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace/residency"
)

// run runs script as a job of its own on r.
func run(t *testing.T, r *Runtime, tpl isolate.Template, script string) isolate.Outcome {
	t.Helper()
	return isolatetest.RunScript(t, r, tpl, script)
}

func TestRunTrivialQuery(t *testing.T) {
	r := newTestRuntime(t)
	o := run(t, r, template(t, r, ""), isolatetest.InspectScript)
	isolatetest.Inspected(t, o, testRootFS)
	assert.Equal(t, 0, o.ExitCode)
	assert.NotZero(t, o.Timings.Run)
	assert.NotZero(t, o.Timings.Destroy)
}

// TestSuite runs the jobs every backend runs alike, with gvisor's own
// limit outcomes.
func TestSuite(t *testing.T) {
	isolatetest.Suite(t, Name, isolatetest.Backend[*Runtime]{
		New: newTestRuntime, Template: template, Leftovers: requireNoLeftovers,
		// The positive control of the page-cache channel only shows that
		// the timing receiver works on this host; reads through the gofer
		// scatter on a loaded host, so it gets three tries. The separation
		// check gets one.
		EvictRoot:        func(t testing.TB, _ *Runtime) { require.NoError(t, residency.EvictCarriers(testRoot)) },
		RootControlTries: 3, Unit: "invocation",
		LimitCases: []isolatetest.LimitCase{
			{Name: "memory", Want: isolate.KindOOM,
				Limits: func(l *isolate.Limits) { l.MemoryBytes = 128 << 20 },
				Script: "b = []\nwhile True:\n    b.append(bytearray(8 << 20))\n"},
			// The Sentry keeps a FIFO made in a gofer mount to itself: the
			// host sees no file at all.
			{Name: "output is a fifo", Want: isolate.KindOutputMissing, Weaken: isolate.Weakening{NoSeccomp: true},
				Script: "import os\nos.mkfifo('/query/out')\n"},
			{Name: "fork is forbidden", Want: isolate.KindSeccompKill,
				Script: "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n"},
		},
	})
}
