package gvisor

import (
	"testing"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestRepoViewIsPrivatePerInvocation: the shared case
// (isolatetest.RepoViewIsPrivatePerInvocation), then one view of the seed
// for all of its invocations.
func TestRepoViewIsPrivatePerInvocation(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.RepoViewIsPrivatePerInvocation(t, r, template(t, r, isolatetest.ViewSeed(t)), isolatetest.ViewHooks{})
	isolatetest.RequireOneView(t, r.dir, r.runID)
}

// TestSweepRemovesViewsACrashLeft is TestSweepRemovesWhatACrashLeft over a
// seed: the crashed runtime's view store and its sandboxes' overlays go
// too.
func TestSweepRemovesViewsACrashLeft(t *testing.T) {
	b := backend
	b.Template = func(t testing.TB, r *Runtime, _ string) isolate.Template {
		return template(t, r, isolatetest.ViewSeed(t))
	}
	isolatetest.SweepRemovesWhatACrashLeft(t, b)
}
