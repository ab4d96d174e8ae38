package gvisor

import (
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

// TestSweepRemovesWhatACrashLeft leaves one prepared sandbox and one running
// job behind, as a crashed broker would, and sweeps them from a fresh runtime
// over the same state dir.
func TestSweepRemovesWhatACrashLeft(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.SweepRemovesWhatACrashLeft(t, isolatetest.Crash{
		Runtime: r, Template: template(t, r, ""),
		// runsc has state for both containers (the idle one is booted),
		// and the busy one has been handed its job.
		Running: func() bool {
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
		},
		Wait: 30 * time.Second,
		Fresh: func() isolate.Runtime {
			after, err := newRuntime(isolate.HostConfig{RunID: isolatetest.RandomID(t), StateDir: filepath.Dir(r.dir), CgroupParent: r.parent})
			require.NoError(t, err)
			return after
		},
		SweepTime: 30 * time.Second,
		Swept: func() {
			ents, err := os.ReadDir(r.dir)
			require.NoError(t, err)
			assert.Empty(t, ents)
		},
		Leftovers: func() { requireNoLeftovers(t, r) },
	})
}
