package workspace

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestDetachAndRemove: stacked mounts and a mount below them are all gone,
// with the directory; a missing directory and "" are fine.
func TestDetachAndRemove(t *testing.T) {
	runtime.LockOSThread() // mountsBelow reads this thread's table
	defer runtime.UnlockOSThread()
	dir := filepath.Join(t.TempDir(), "scratch")
	t.Cleanup(func() { _ = unmountBelow(context.Background(), filepath.Dir(dir)) })
	require.NoError(t, MountTmpfs(dir, 1<<20, 0o700, 0, 0))
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"))
	require.NoError(t, MountTmpfs(filepath.Join(dir, "awf"), 1<<20, 0o755, 0, 0))
	below, err := mountsBelow(dir)
	require.NoError(t, err)
	require.Len(t, below, 3)
	require.NoError(t, DetachAndRemove(dir))
	below, err = mountsBelow(dir)
	require.NoError(t, err)
	assert.Empty(t, below)
	assert.NoDirExists(t, dir)
	assert.NoError(t, DetachAndRemove(dir))
	assert.NoError(t, DetachAndRemove(""))
}
