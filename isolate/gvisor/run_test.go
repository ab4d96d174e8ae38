package gvisor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace"
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

// backend is gvisor's side of the tests every backend runs alike, with
// gvisor's own limit outcomes.
var backend = isolatetest.Backend[*Runtime]{
	New: newTestRuntime, Template: template, Leftovers: requireNoLeftovers,
	// The positive control of the page-cache channel only shows that
	// the timing receiver works on this host. Every read through the
	// Sentry is a jittery trip that dwarfs a cold page's few
	// microseconds, so one run decodes from about three bits in five (a
	// loaded host) to three in four: the control pools up to sixteen runs
	// (residency.ControlPassed), and a quiet host passes in two. Eight
	// were once too few in a CI run that loaded the host with other
	// packages' tests; more looks keep the same overall chance level, as
	// each is tested at Alpha/16. The separation check gets one.
	EvictRoot:        func(t testing.TB, _ *Runtime) { require.NoError(t, residency.EvictCarriers(testRoot)) },
	RootControlTries: 16, Unit: "invocation",
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
	Crash: func(_ testing.TB, r *Runtime) isolatetest.Crash {
		return isolatetest.Crash{
			StateDir: r.dir, Wait: 30 * time.Second, SweepTime: 30 * time.Second,
			Running: func() bool { return busyBooted(r) },
			Open: func(h isolate.HostConfig) (isolate.Runtime, error) {
				h.CgroupParent = r.parent
				return New(h)
			},
		}
	},
}

// busyBooted reports whether runsc has state for both containers of r (the
// idle one is booted) and the busy one has been handed its job.
func busyBooted(r *Runtime) bool {
	m, _ := filepath.Glob(filepath.Join(r.dir, "*", "runsc", "*.state"))
	if len(m) != 2 {
		return false
	}
	for _, st := range m {
		if j, err := workspace.ReadJournal(filepath.Dir(filepath.Dir(st))); err == nil && j.InvocationID == "busy" {
			return true
		}
	}
	return false
}

// TestSuite runs the jobs every backend runs alike.
func TestSuite(t *testing.T) { isolatetest.Suite(t, Name, backend) }

// TestSweepRemovesWhatACrashLeft leaves one prepared sandbox and one running
// job behind, as a crashed broker would, and sweeps them from a fresh runtime
// over the same state dir.
func TestSweepRemovesWhatACrashLeft(t *testing.T) { isolatetest.SweepRemovesWhatACrashLeft(t, backend) }
