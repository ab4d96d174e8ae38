package hostview_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/hostview"
)

// TestEntriesTable checks the list's shape: every consumer relies on it.
func TestEntriesTable(t *testing.T) {
	es := hostview.Entries()
	require.NotEmpty(t, es)
	paths := make([]string, len(es))
	for i, e := range es {
		paths[i] = e.Path
	}
	assert.True(t, sort.StringsAreSorted(paths), "entries must be sorted by path: %v", paths)
	seen := map[string]bool{}
	for _, e := range es {
		t.Run(e.Path, func(t *testing.T) {
			assert.False(t, seen[e.Path], "duplicate entry")
			seen[e.Path] = true
			assert.Equal(t, path.Clean(e.Path), e.Path, "path must be clean")
			assert.True(t, e.Path == "/sys" || strings.HasPrefix(e.Path, "/proc/") || strings.HasPrefix(e.Path, "/sys/"),
				"entries live under /proc or /sys")
			assert.NotEmpty(t, strings.TrimSpace(e.Reason), "every entry says why")
			assert.Contains(t, []hostview.Action{hostview.Snapshot, hostview.Mask}, e.Action)
			got, ok := hostview.Lookup(e.Path)
			assert.True(t, ok, "Lookup finds every entry")
			assert.Equal(t, e, got)
		})
	}
	// No entry lies inside another: a consumer mounts each one over the
	// host path, and a mount inside a masked directory could not be made.
	for _, a := range paths {
		for _, b := range paths {
			assert.False(t, a != b && strings.HasPrefix(b, a+"/"), "%s is inside %s", b, a)
		}
	}
	assert.Equal(t, paths, hostview.MaskPaths())
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/proc/stat", true},
		{"/proc/sys", true},
		{"/sys", true},
		{"/proc/sys/fs/file-nr", false}, // covered by /proc/sys, not an entry itself
		{"/proc/sy", false},
		{"/proc/self", false},
		{"/proc/stat/", false},
		{"", false},
		{"/zzz", false},
	} {
		_, ok := hostview.Lookup(tc.path)
		assert.Equal(t, tc.want, ok, tc.path)
	}
}

func TestEntriesIsACopy(t *testing.T) {
	es := hostview.Entries()
	es[0].Path = "/changed"
	ms := hostview.MaskPaths()
	ms[0] = "/changed"
	assert.NotEqual(t, "/changed", hostview.Entries()[0].Path)
	assert.NotEqual(t, "/changed", hostview.MaskPaths()[0])
}

func TestLiveProcEntry(t *testing.T) {
	for name, want := range map[string]bool{
		"1": true, "4242": true, "self": true, "thread-self": true,
		"0": false, "01": false, "stat": false, "sys": false, "": false, "1a": false,
	} {
		assert.Equal(t, want, hostview.LiveProcEntry(name), name)
	}
}

func TestDescribeNamesEveryEntry(t *testing.T) {
	d := hostview.Describe()
	for _, e := range hostview.Entries() {
		assert.Contains(t, d, "| `"+e.Path+"` | "+e.Action.String()+" | "+e.Reason+" |")
	}
}

func TestCopyAbsent(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "x")
	err := hostview.Copy(filepath.Join(t.TempDir(), "missing"), dst)
	require.ErrorIs(t, err, hostview.ErrAbsent)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.NoFileExists(t, dst)
}

// TestCopyTree copies a tree with a link, an unreadable file, a mount point
// and a big file, and checks what is kept.
func TestCopyTree(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "top"), []byte("1 2 3\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a", "b", "deep"), []byte("deep\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(src, "big"), make([]byte, hostview.MaxSnapshotBytes+10), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "link")))
	require.NoError(t, unix.Mkfifo(filepath.Join(src, "fifo"), 0o644))
	mnt := filepath.Join(src, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"), "a separate mount below the entry")
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "other-fs"), []byte("x"), 0o644))

	dst := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, hostview.Copy(src, dst))
	var got []string
	require.NoError(t, filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		rel, _ := filepath.Rel(dst, p)
		got = append(got, rel)
		if d.IsDir() {
			assert.Equal(t, fs.FileMode(0o555), fi.Mode().Perm(), rel)
		} else {
			assert.Equal(t, fs.FileMode(0o444), fi.Mode().Perm(), rel)
			assert.True(t, fi.Mode().IsRegular(), rel)
		}
		return nil
	}))
	assert.ElementsMatch(t, []string{".", "a", "a/b", "a/b/deep", "big", "top"}, got,
		"links, fifos and other filesystems are left out")
	b, err := os.ReadFile(filepath.Join(dst, "big"))
	require.NoError(t, err)
	assert.Len(t, b, hostview.MaxSnapshotBytes)
	b, err = os.ReadFile(filepath.Join(dst, "top"))
	require.NoError(t, err)
	assert.Equal(t, "1 2 3\n", string(b))
}

// TestCopyEveryHostEntry freezes every Snapshot entry of this host, as the
// agent's view does: present entries copy, absent ones say ErrAbsent, and
// /proc/sys leaves binfmt_misc out.
func TestCopyEveryHostEntry(t *testing.T) {
	root := t.TempDir()
	for i, e := range hostview.Entries() {
		if e.Action != hostview.Snapshot {
			continue
		}
		dst := filepath.Join(root, fmt.Sprintf("%d", i))
		err := hostview.Copy(e.Path, dst)
		if _, serr := os.Lstat(e.Path); serr != nil {
			assert.ErrorIs(t, err, hostview.ErrAbsent, e.Path)
			continue
		}
		require.NoError(t, err, e.Path)
		_, err = os.Lstat(dst)
		assert.NoError(t, err, "%s was copied", e.Path)
	}
	sys := filepath.Join(root, "sys")
	require.NoError(t, hostview.Copy("/proc/sys", sys))
	assert.NoDirExists(t, filepath.Join(sys, "fs", "binfmt_misc"))
	assert.FileExists(t, filepath.Join(sys, "fs", "file-nr"))
	assert.FileExists(t, filepath.Join(sys, "kernel", "random", "entropy_avail"))
}

func TestSandboxMaskPaths(t *testing.T) {
	ps := hostview.SandboxMaskPaths()
	assert.True(t, sort.StringsAreSorted(ps))
	for i := 1; i < len(ps); i++ {
		assert.NotEqual(t, ps[i-1], ps[i], "duplicate")
	}
	for _, p := range hostview.MaskPaths() {
		assert.Contains(t, ps, p, "every entry is masked")
	}
	for _, p := range []string{"/proc/kcore", "/proc/kallsyms", "/proc/sched_debug", "/proc/timer_list", "/proc/keys", "/sys/firmware"} {
		assert.Contains(t, ps, p)
	}
}
