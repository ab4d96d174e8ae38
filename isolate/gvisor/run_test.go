package gvisor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

func run(t *testing.T, r *Runtime, tpl isolate.Template, script string) isolate.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "inv-" + isolatetest.RandomID(t)[:8], Script: []byte(script)}})
}

func TestRunTrivialQuery(t *testing.T) {
	r := newTestRuntime(t)
	o := run(t, r, template(t, r, ""), isolatetest.InspectScript)
	isolatetest.Inspected(t, o, testRootFS)
	assert.Equal(t, 0, o.ExitCode)
	assert.NotZero(t, o.Timings.Run)
	assert.NotZero(t, o.Timings.Destroy)
}

func TestLimitsGiveTypedOutcomes(t *testing.T) {
	r := newTestRuntime(t)
	cases := append([]isolatetest.LimitCase{
		{Name: "memory", Want: isolate.KindOOM,
			Limits: func(l *isolate.Limits) { l.MemoryBytes = 128 << 20 },
			Script: "b = []\nwhile True:\n    b.append(bytearray(8 << 20))\n"},
		// The Sentry keeps a FIFO made in a gofer mount to itself: the host
		// sees no file at all.
		{Name: "output is a fifo", Want: isolate.KindOutputMissing, Weaken: isolate.Weakening{NoSeccomp: true},
			Script: "import os\nos.mkfifo('/query/out')\n"},
		{Name: "fork is forbidden", Want: isolate.KindSeccompKill,
			Script: "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n"},
	}, isolatetest.CommonLimitCases()...)
	isolatetest.RunLimitCases(t, r, cases, func(t testing.TB) isolate.Template { return template(t, r, "") }, func(t *testing.T, tpl isolate.Template, script string) isolate.Outcome {
		return run(t, r, tpl, script)
	})
}

func TestRepoWritesNeverReachTheSeed(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.RepoWritesNeverReachTheSeed(t, func(t *testing.T, seed, script string) isolate.Outcome {
		return run(t, r, template(t, r, seed), script)
	})
}

func TestNilPolicyFailsClosed(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.NilPolicyFailsClosed(t, template(t, r, ""), func(t *testing.T, tpl isolate.Template, script string) isolate.Outcome {
		return run(t, r, tpl, script)
	})
}

func TestSandboxIsSingleUseAndDestroyIsIdempotent(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.SingleUse(t, r, template(t, r, ""), func() { requireNoLeftovers(t, r) })
}
