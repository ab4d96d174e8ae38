package enclave

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// mountsAt counts the mounts whose mount point is path.
func mountsAt(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	n := 0
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == path {
			n++
		}
	}
	return n
}

// TestNetNSDirIsItsOwnTmpfs: NetNSDir is a root-only tmpfs mounted on
// itself, once however often it is ensured, and an enclave's whole life
// (its namespaces made and removed) changes nothing an agent could stat
// outside it: not the parent directory's mtime, ctime or link count, and
// not its filesystem's free block and inode counts. Before, the enclave
// namespaces were files in /run/netns, whose mtime told the agent the
// moment a confidential enclave ended.
func TestNetNSDirIsItsOwnTmpfs(t *testing.T) {
	require.NoError(t, EnsureNetNSDir())
	require.NoError(t, EnsureNetNSDir())
	assert.Equal(t, 1, mountsAt(t, NetNSDir), "NetNSDir must be one tmpfs, not stacked ones")
	var fs unix.Statfs_t
	require.NoError(t, unix.Statfs(NetNSDir, &fs))
	assert.Equal(t, int64(unix.TMPFS_MAGIC), int64(fs.Type))
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(NetNSDir, &st))
	assert.Equal(t, uint32(unix.S_IFDIR|0o700), st.Mode)
	assert.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid})

	parent := filepath.Dir(NetNSDir)
	var before, after unix.Stat_t
	var fsBefore, fsAfter unix.Statfs_t
	require.NoError(t, unix.Lstat(parent, &before))
	require.NoError(t, unix.Statfs(parent, &fsBefore))
	e, err := New(context.Background(), Options{RunID: fmt.Sprintf("nsdir%d", os.Getpid()), Name: "x"})
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.NoError(t, unix.Lstat(parent, &after))
	require.NoError(t, unix.Statfs(parent, &fsAfter))
	assert.Equal(t, before.Mtim, after.Mtim, "%s mtime moved", parent)
	assert.Equal(t, before.Ctim, after.Ctim, "%s ctime moved", parent)
	assert.Equal(t, before.Nlink, after.Nlink)
	// Other jobs on the host write to the parent's filesystem too; the
	// enclave's own files are on NetNSDir's tmpfs, which is what this checks.
	assert.NotEqual(t, fsBefore.Fsid, fs.Fsid, "NetNSDir shares a filesystem with %s", parent)
}

// TestEnsureNetNSDirRefuses: a directory that is not root's is refused, and
// nothing is mounted on it; one that is root's but open to others is
// narrowed to 0700 before its tmpfs is mounted.
func TestEnsureNetNSDirRefuses(t *testing.T) {
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	require.NoError(t, os.Mkdir(theirs, 0o700))
	require.NoError(t, os.Chown(theirs, 65534, 65534))
	err := ensureNetNSDir(theirs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "owned by root:root with mode 0700")
	assert.Zero(t, mountsAt(t, theirs))

	wide := filepath.Join(base, "wide")
	require.NoError(t, os.Mkdir(wide, 0o755))
	require.NoError(t, ensureNetNSDir(wide))
	defer func() { assert.NoError(t, unix.Unmount(wide, unix.MNT_DETACH)) }()
	assert.Equal(t, 1, mountsAt(t, wide))
	fi, err := os.Stat(wide)
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|0o700, fi.Mode())

	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(wide, link))
	require.Error(t, ensureNetNSDir(link), "a symlink is refused")
}

// TestSweepReclaimsLegacyNetNS: a namespace file that a broker before
// NetNSDir left in /run/netns is still swept, and Leftovers names it.
func TestSweepReclaimsLegacyNetNS(t *testing.T) {
	if _, err := os.Lstat(LegacyNetNSDir); errors.Is(err, os.ErrNotExist) {
		// A host without iproute2's directory gets it back as it was.
		require.NoError(t, os.Mkdir(LegacyNetNSDir, 0o755))
		t.Cleanup(func() { assert.NoError(t, os.Remove(LegacyNetNSDir)) })
	}
	run := fmt.Sprintf("legacy%d", os.Getpid())
	p := filepath.Join(LegacyNetNSDir, Prefix+run+".old-e")
	require.NoError(t, os.WriteFile(p, nil, 0o444))
	defer os.Remove(p)
	assert.Contains(t, Leftovers(""), p)
	require.NoError(t, SweepRuns(context.Background(), func(r string) bool { return r != run }))
	_, err := os.Stat(p)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
