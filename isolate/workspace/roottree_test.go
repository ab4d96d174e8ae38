package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/workspace/residency"
	"github.com/awf-project/awf/rootfs"
)

// TestRootTreeCarriesNoState proves from the host what makes a shared root
// tree safe: it holds its rootfs, its pages stay resident whatever anyone
// asks (the same request evicts the source tree's page, so the check can
// fail), a lookup of a missing name leaves no negative dentry, and a mount
// of it that is made writable still cannot write, because the superblock
// is read-only.
func TestRootTreeCarriesNoState(t *testing.T) {
	root := buildTestRoot(t)
	s, dir := newTreeStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr, err := s.Tree(ctx, root)
	require.NoError(t, err)
	again, err := s.Tree(ctx, root)
	require.NoError(t, err)
	require.Same(t, tr, again, "one tree per rootfs")
	want, err := rootfs.Verify(ctx, root, "")
	require.NoError(t, err)
	require.Equal(t, want, tr.Digest)
	_, err = rootfs.Verify(ctx, tr.Dir, want)
	require.NoError(t, err, "the tree holds its rootfs")

	var sfs unix.Statfs_t
	require.NoError(t, unix.Statfs(tr.Dir, &sfs))
	require.EqualValues(t, unix.RAMFS_MAGIC, uint32(sfs.Type), "the tree is not on a ramfs")
	require.NotZero(t, sfs.Flags&unix.ST_RDONLY, "the tree's mount is writable")

	t.Run("pages stay resident", func(t *testing.T) {
		for _, base := range []string{root, tr.Dir} {
			require.NoError(t, residency.Evict(filepath.Join(base, carrier)))
		}
		require.False(t, resident(t, filepath.Join(root, carrier)), "the source tree's page was not evicted: the check proves nothing")
		require.True(t, resident(t, filepath.Join(tr.Dir, carrier)), "a page of the tree was evicted")
	})

	t.Run("no negative dentries", func(t *testing.T) {
		// The count is host-wide, so other work only adds to it: one of
		// three tries must stay far below one dentry per lookup.
		const lookups = 20000
		best := int64(-1)
		for try := 0; try < 3; try++ {
			before := negativeDentries(t)
			for i := 0; i < lookups; i++ {
				_, err := os.Lstat(filepath.Join(tr.Dir, "usr", fmt.Sprintf("awf-missing-%d-%d", try, i)))
				require.ErrorIs(t, err, os.ErrNotExist)
			}
			grew := negativeDentries(t) - before
			if best < 0 || grew < best {
				best = grew
			}
		}
		require.Less(t, best, int64(lookups/10), "lookups of missing names in the tree leave negative dentries")
	})

	t.Run("a writable mount cannot write", func(t *testing.T) {
		m := filepath.Join(dir, "rw")
		require.NoError(t, os.Mkdir(m, 0o700))
		require.NoError(t, unix.Mount(tr.Dir, m, "", unix.MS_BIND, ""))
		t.Cleanup(func() { require.NoError(t, UnmountRoot(m)) })
		// A bind remount drops MS_RDONLY from this mount only.
		require.NoError(t, unix.Mount("", m, "", unix.MS_BIND|unix.MS_REMOUNT, ""))
		err := os.WriteFile(filepath.Join(m, "awf-written"), []byte("x"), 0o644)
		require.ErrorIs(t, err, unix.EROFS)
		_, err = os.OpenFile(filepath.Join(m, carrier), os.O_WRONLY, 0)
		require.ErrorIs(t, err, unix.EROFS)
	})
}

// negativeDentries is the host's count of negative dentries
// (/proc/sys/fs/dentry-state, fifth field).
func negativeDentries(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/fs/dentry-state")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.GreaterOrEqual(t, len(f), 5, "dentry-state: %q", b)
	n, err := strconv.ParseInt(f[4], 10, 64)
	require.NoError(t, err)
	return n
}

// TestRootTreeFailsClosed checks that a copy that does not hold its
// rootfs is never handed out, and leaves no mount behind: the copier gives
// every entry to the caller, so a file of another owner in the source makes
// the copy's digest differ.
func TestRootTreeFailsClosed(t *testing.T) {
	root := buildTestRoot(t)
	s, dir := newTreeStore(t)
	require.NoError(t, os.Chown(filepath.Join(root, carrier), 1234, 1234))
	_, err := s.Tree(context.Background(), root)
	require.ErrorContains(t, err, "does not hold its tree")
	ents, err := os.ReadDir(filepath.Join(dir, "fs"))
	require.NoError(t, err)
	for _, e := range ents {
		require.False(t, strings.HasPrefix(e.Name(), treePrefix), "a refused tree left %s", e.Name())
	}
}

// newTreeStore returns a store in a fresh directory, which it closes at
// cleanup, checking that no mount is left below the directory.
func newTreeStore(t *testing.T) (*RootImages, string) {
	t.Helper()
	dir := t.TempDir()
	s := NewRootImages(filepath.Join(dir, "fs"))
	t.Cleanup(func() {
		require.NoError(t, s.Close(context.Background()))
		requireNoRootMounts(t, dir)
	})
	return s, dir
}
