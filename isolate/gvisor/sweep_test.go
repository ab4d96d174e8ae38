package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// TestSweepRemovesWhatACrashLeft leaves one prepared sandbox and one running
// job behind, as a crashed broker would, and sweeps them from a fresh runtime
// over the same state dir.
func TestSweepRemovesWhatACrashLeft(t *testing.T) {
	r := newTestRuntime(t)
	ctx := context.Background()
	idle, err := r.Prepare(ctx, template(t, r, ""))
	require.NoError(t, err)
	busy, err := r.Prepare(ctx, template(t, r, ""))
	require.NoError(t, err)
	done := make(chan isolate.Outcome, 1)
	go func() {
		done <- busy.Exec(ctx, isolate.Job{InvocationID: "busy", Script: []byte("import time\ntime.sleep(600)\n")})
	}()
	// Wait until runsc has state for the running container.
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(r.dir, "*", "runsc", "*.state"))
		return len(m) == 1
	}, 30*time.Second, 20*time.Millisecond)

	after, err := newRuntime(isolate.HostConfig{RunID: randomID(t), StateDir: filepath.Dir(r.dir), CgroupParent: r.parent})
	require.NoError(t, err)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, after.Sweep(sctx))
	o := <-done
	assert.NotEqual(t, isolate.KindOK, o.Kind)
	ents, err := os.ReadDir(r.dir)
	require.NoError(t, err)
	assert.Empty(t, ents)
	// The crashed runtime's handles still destroy cleanly.
	require.NoError(t, idle.Destroy(ctx))
	require.NoError(t, busy.Destroy(ctx))
	requireNoLeftovers(t, r)
}
