package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTeardownKeepsTheRootWhenTheSweepFails: a run whose runtime sweep
// fails (here: the runtime cannot even be opened) keeps its private root,
// journal and lock file included, for the next start-up sweep, releases its
// lock so that sweep can take it, and still removes its ingress directory.
func TestTeardownKeepsTheRootWhenTheSweepFails(t *testing.T) {
	base := t.TempDir()
	l := NewLayout(NewRunID(), filepath.Join(base, "private"), filepath.Join(base, "ingress"), filepath.Join(base, "archive"))
	for _, d := range []string{l.StateDir, l.AuditDir, l.SocketDir} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	lock, err := lockRun(l.LockPath)
	require.NoError(t, err)
	r := &Run{Layout: l, Spec: Spec{Layout: l, Runtime: "no-such-runtime"}, lock: lock}
	err = Teardown(context.Background(), r, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kept for the next start-up sweep")
	assert.DirExists(t, l.StateDir)
	assert.FileExists(t, l.LockPath)
	assert.NoDirExists(t, l.IngressRoot)
	again, err := lockRun(l.LockPath)
	require.NoError(t, err, "the lock was not released for the next sweep")
	again.Close()
}
