package staging

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// copySource builds a small tree with links that point out of it and a
// directory outside that holds a secret marker.
func copySource(t *testing.T) (src, outside string) {
	base := t.TempDir()
	outside = filepath.Join(base, "outside")
	writeFile(t, filepath.Join(outside, "SECRET"), "secret-marker", 0o644)
	src = filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "alpha", 0o644)
	writeFile(t, filepath.Join(src, "bin", "x"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(src, "d1", "d2", "deep.txt"), "deep", 0o600)
	require.NoError(t, os.Symlink(outside, filepath.Join(src, "abs-out")))
	require.NoError(t, os.Symlink("../outside", filepath.Join(src, "rel-out")))
	require.NoError(t, os.Symlink("../outside/SECRET", filepath.Join(src, "d1", "file-out")))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(src, "in")))
	require.NoError(t, os.Symlink("dangling-target", filepath.Join(src, "dangling")))
	return src, outside
}

func TestCopyTreeCopiesLinksVerbatimAndNeverFollowsThem(t *testing.T) {
	src, _ := copySource(t)
	dst := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, CopyTree(context.Background(), src, dst, CopyLimits{}))
	assert.Equal(t, treeHash(t, src), treeHash(t, dst), "same names, types, modes, owners, link targets and bytes")
	assert.Empty(t, findBytes(t, dst, []byte("secret-marker")), "nothing behind a link was copied")
	for link, target := range map[string]string{"abs-out": filepath.Join(filepath.Dir(src), "outside"),
		"rel-out": "../outside", "d1/file-out": "../outside/SECRET", "in": "a.txt", "dangling": "dangling-target"} {
		fi, err := os.Lstat(filepath.Join(dst, link))
		require.NoError(t, err)
		assert.True(t, fi.Mode()&os.ModeSymlink != 0, "%s stays a link", link)
		got, err := os.Readlink(filepath.Join(dst, link))
		require.NoError(t, err)
		assert.Equal(t, target, got)
	}
	a, err := os.Stat(filepath.Join(src, "a.txt"))
	require.NoError(t, err)
	b, err := os.Stat(filepath.Join(dst, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, a.ModTime(), b.ModTime(), "modification times are kept")
}

func TestCopyTreeRejectsSymlinkRootsAndExistingDestinations(t *testing.T) {
	src, outside := copySource(t)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(src, link))
	dst := filepath.Join(t.TempDir(), "copy")
	require.Error(t, CopyTree(context.Background(), link, dst, CopyLimits{}))
	_, err := os.Lstat(dst)
	assert.ErrorIs(t, err, os.ErrNotExist)

	// An existing destination is refused and left alone.
	require.Error(t, CopyTree(context.Background(), src, outside, CopyLimits{}))
	assert.FileExists(t, filepath.Join(outside, "SECRET"))
	// A destination that is a symlink is not written through.
	dlink := filepath.Join(t.TempDir(), "dlink")
	require.NoError(t, os.Symlink(t.TempDir(), dlink))
	require.Error(t, CopyTree(context.Background(), src, dlink, CopyLimits{}))
	assert.Error(t, CopyTree(context.Background(), src, filepath.Join(t.TempDir(), "x"), CopyLimits{MaxBytes: -1}))
}

func TestCopyTreeRejectsSpecialFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, p string)
	}{
		{"fifo", func(t *testing.T, p string) { require.NoError(t, unix.Mkfifo(p, 0o644)) }},
		{"socket", func(t *testing.T, p string) { makeSocket(t, p) }},
		{"char device", func(t *testing.T, p string) {
			require.NoError(t, unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		}},
		{"block device", func(t *testing.T, p string) {
			require.NoError(t, unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := copySource(t)
			tc.make(t, filepath.Join(src, "d1", "special"))
			dst := filepath.Join(t.TempDir(), "copy")
			err := CopyTree(context.Background(), src, dst, CopyLimits{})
			requireRule(t, err, RuleSpecialFile)
			_, err = os.Lstat(dst)
			assert.ErrorIs(t, err, os.ErrNotExist, "a failed copy is removed")
		})
	}
}

func TestCopyTreeLimits(t *testing.T) {
	src, _ := copySource(t) // 3 files of 5+10+4 bytes; 11 entries; depth 2
	for _, tc := range []struct {
		name string
		l    CopyLimits
		ok   bool
	}{
		{"bytes at the cap", CopyLimits{MaxBytes: 19}, true},
		{"bytes over the cap", CopyLimits{MaxBytes: 18}, false},
		{"files at the cap", CopyLimits{MaxFiles: 11}, true},
		{"files over the cap", CopyLimits{MaxFiles: 10}, false},
		{"depth at the cap", CopyLimits{MaxDepth: 2}, true},
		{"depth over the cap", CopyLimits{MaxDepth: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "copy")
			err := CopyTree(context.Background(), src, dst, tc.l)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrCopyLimit)
			_, err = os.Lstat(dst)
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

func TestCopyTreeBreaksHardlinksAndDropsSetID(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, filepath.Join(src, "one"), "shared", 0o644)
	require.NoError(t, os.Link(filepath.Join(src, "one"), filepath.Join(src, "two")))
	writeFile(t, filepath.Join(src, "suid"), "x", 0o755)
	require.NoError(t, os.Chmod(filepath.Join(src, "suid"), 0o4755|os.ModeSetuid))
	require.NoError(t, unix.Chmod(filepath.Join(src, "suid"), 0o4755))
	dst := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, CopyTree(context.Background(), src, dst, CopyLimits{}))
	var s1, s2, s3 unix.Stat_t
	require.NoError(t, unix.Lstat(filepath.Join(dst, "one"), &s1))
	require.NoError(t, unix.Lstat(filepath.Join(dst, "two"), &s2))
	assert.NotEqual(t, s1.Ino, s2.Ino)
	assert.EqualValues(t, 1, s1.Nlink)
	assert.EqualValues(t, 1, s2.Nlink)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "one"), []byte("changed"), 0o644))
	b, err := os.ReadFile(filepath.Join(dst, "two"))
	require.NoError(t, err)
	assert.Equal(t, "shared", string(b))
	require.NoError(t, unix.Lstat(filepath.Join(dst, "suid"), &s3))
	assert.EqualValues(t, 0o755, s3.Mode&0o7777)
}

func TestCopyTreeOwnerAndWritable(t *testing.T) {
	src, _ := copySource(t)
	require.NoError(t, os.Chmod(filepath.Join(src, "a.txt"), 0o444))
	dst := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, CopyTree(context.Background(), src, dst,
		CopyLimits{Owner: &Ownership{UID: 65534, GID: 65534}, Writable: true}))
	require.NoError(t, filepathWalkLstat(dst, func(p string, st *unix.Stat_t) {
		assert.EqualValues(t, 65534, st.Uid, p)
		assert.EqualValues(t, 65534, st.Gid, p)
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			assert.NotZero(t, st.Mode&0o200, "%s is writable by its owner", p)
		}
	}))
}

func filepathWalkLstat(dir string, fn func(string, *unix.Stat_t)) error {
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fn(p, &st)
		return nil
	})
}

// TestCopyTreeRaceNeverEscapes swaps a source directory with a symlink to an
// outside directory while copies run: whatever the interleaving, a copy either
// fails or holds no byte from outside.
func TestCopyTreeRaceNeverEscapes(t *testing.T) {
	t.Parallel()
	src, outside := copySource(t)
	victim := filepath.Join(src, "d1")
	parked := filepath.Join(filepath.Dir(src), "parked")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			// victim: directory -> symlink to outside -> directory again.
			if os.Rename(victim, parked) == nil {
				_ = os.Symlink(outside, victim)
				_ = os.Remove(victim)
				_ = os.Rename(parked, victim)
			}
		}
	}()
	var ok, failed int
	base := t.TempDir()
	for i := range 300 {
		dst := filepath.Join(base, fmt.Sprint(i))
		if err := CopyTree(context.Background(), src, dst, CopyLimits{}); err != nil {
			failed++
			continue
		}
		ok++
		assert.Empty(t, findBytes(t, dst, []byte("secret-marker")), "copy %d escaped", i)
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(dst, "d1"), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			target, _ := os.Readlink(filepath.Join(dst, "d1"))
			assert.Equal(t, outside, target, "a raced directory is copied as the link it was")
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("copies: %d ok, %d failed under the race", ok, failed)
}

func TestCopyTreeHonoursCancellation(t *testing.T) {
	src, _ := copySource(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := filepath.Join(t.TempDir(), "copy")
	err := CopyTree(ctx, src, dst, CopyLimits{})
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	_, err = os.Lstat(dst)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestSeedsStayByteIdentical copies a staged seed many times, works in every
// copy (reads, git log/grep, edits, commits) and checks the seed's tree hash
// never changes.
func TestSeedsStayByteIdentical(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/stable", defaultSpec("stable"))
	seeds, err := Stage(context.Background(), f.opts(), []Repo{{Slug: "acme/stable", Sensitivity: "public"}})
	require.NoError(t, err)
	seed := seeds[0].Dir
	before := treeHash(t, seed)
	base := t.TempDir()
	for i := range 25 {
		dst := filepath.Join(base, fmt.Sprint(i))
		require.NoError(t, CopyTree(context.Background(), seed, dst,
			CopyLimits{MaxBytes: 64 << 20, MaxFiles: 10000, MaxDepth: 64, Writable: true}))
		assert.Contains(t, tgitRO(t, dst, "grep", "-n", "needle"), "needle stable")
		assert.Contains(t, tgitRO(t, dst, "log", "--oneline"), "second")
		writeFile(t, filepath.Join(dst, "README.md"), "overwritten", 0o644)
		require.NoError(t, os.Remove(filepath.Join(dst, "src", "main.py")))
		tgit(t, dst, "-c", "safe.directory=*", "add", "-A")
		tgit(t, dst, "-c", "safe.directory=*", "commit", "-q", "-m", "mutate")
		b, err := os.ReadFile(filepath.Join(seed, "README.md"))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(string(b), "# fixture"))
		require.NoError(t, os.RemoveAll(dst))
	}
	assert.Equal(t, before, treeHash(t, seed))
	require.NoError(t, VerifyReadOnly(context.Background(), seed))
	var st syscall.Stat_t
	require.NoError(t, syscall.Lstat(filepath.Join(seed, "README.md"), &st))
	assert.EqualValues(t, 1, st.Nlink)
}
