package isolatetest

import (
	"context"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace/residency"
)

// Backend is one backend's side of Suite: how its tests get a fresh
// probed runtime (whose cleanup sweeps it), a template over the test
// rootfs with seed as its repository ("" for none), and their check that
// nothing of a runtime remains. R is the backend's runtime type, so that
// Template and Leftovers may read its fields.
type Backend[R isolate.Runtime] struct {
	New       func(testing.TB) R
	Template  func(t testing.TB, r R, seed string) isolate.Template
	Leftovers func(testing.TB, R)
	// LimitCases are the limit jobs whose outcome is the backend's own;
	// Suite runs them before CommonLimitCases.
	LimitCases []LimitCase
	// EvictRoot drops from the host's page cache every file through which
	// r's sandboxes could read their root (RootPageCacheNotShared's evict).
	EvictRoot func(testing.TB, R)
	// RootControlTries is the most runs that test's positive control
	// pools (one when zero), and Unit what one job runs in, for its messages:
	// "container" or "invocation".
	RootControlTries int
	Unit             string
	// Crash is the backend's side of SweepRemovesWhatACrashLeft for r.
	Crash func(t testing.TB, r R) Crash
	// HostDisk names the paths whose free counts show a host disk to
	// r's scripts (a declared residual; nil: none), and whether that disk
	// is the one the test's temporary directory is on (HostDiskUnseen).
	HostDisk func(t testing.TB, r R) (visible []string, sameDisk bool)
}

// Suite runs, each on a fresh runtime of b, the jobs every backend must
// run to the same outcome: the limit cases, the repository view, a
// template without a policy, single use and idempotent destroy, the
// output capture, the host disk's counts, and the conformance job, and the root page-cache channel. The backends each wrote these tests around the same
// helpers; one suite keeps their list from drifting apart. name is the
// backend's, as Conformance and the deviations table know it.
func Suite[R isolate.Runtime](t *testing.T, name string, b Backend[R]) {
	t.Run("limits", func(t *testing.T) {
		r := b.New(t)
		cases := append(append([]LimitCase(nil), b.LimitCases...), CommonLimitCases()...)
		RunLimitCases(t, r, cases, func(t testing.TB) isolate.Template { return b.Template(t, r, "") }, func(t *testing.T, tpl isolate.Template, script string) isolate.Outcome {
			return RunScript(t, r, tpl, script)
		})
	})
	t.Run("repo writes never reach the seed", func(t *testing.T) {
		r := b.New(t)
		RepoWritesNeverReachTheSeed(t, func(t *testing.T, seed, script string) isolate.Outcome {
			return RunScript(t, r, b.Template(t, r, seed), script)
		})
	})
	t.Run("nil policy fails closed", func(t *testing.T) {
		r := b.New(t)
		NilPolicyFailsClosed(t, b.Template(t, r, ""), func(t *testing.T, tpl isolate.Template, script string) isolate.Outcome {
			return RunScript(t, r, tpl, script)
		})
	})
	t.Run("single use and idempotent destroy", func(t *testing.T) {
		r := b.New(t)
		SingleUse(t, r, b.Template(t, r, ""), func() { b.Leftovers(t, r) })
	})
	t.Run("root page cache not shared", func(t *testing.T) {
		r := b.New(t)
		run := func(_ residency.Mode, script []byte) isolate.Outcome {
			return RunScript(t, r, b.Template(t, r, ""), string(script))
		}
		RootPageCacheNotShared(t, max(1, b.RootControlTries), b.Unit, func() { b.EvictRoot(t, r) }, run, run)
	})
	t.Run("output is captured and capped", func(t *testing.T) {
		r := b.New(t)
		OutputCapturedAndCapped(t, b.Template(t, r, ""), func(tpl isolate.Template, script string) isolate.Outcome {
			return RunScript(t, r, tpl, script)
		})
	})
	t.Run("host disk unseen", func(t *testing.T) {
		r := b.New(t)
		var visible []string
		same := false
		if b.HostDisk != nil {
			visible, same = b.HostDisk(t, r)
		}
		HostDiskUnseen(t, r, b.Template(t, r, OneFileSeed(t)), visible, same)
	})
	t.Run("conformance", func(t *testing.T) {
		r := b.New(t)
		Conformance(t, name, func(seed string) isolate.Template { return b.Template(t, r, seed) }, func(tpl isolate.Template, script string) isolate.Outcome {
			return RunScript(t, r, tpl, script)
		})
	})
}

// RunScript runs script on rt as one job of its own invocation, within
// two minutes.
func RunScript(t testing.TB, rt isolate.Runtime, tpl isolate.Template, script string) isolate.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "inv-" + RandomID(t)[:8], Script: []byte(script)}})
}
