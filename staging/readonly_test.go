package staging

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// sealedTree builds a tree that passes VerifyReadOnly: 0555 directories,
// 0444/0555 files and symlinks (one pointing at a writable directory outside).
func sealedTree(t *testing.T) (dir, outside string) {
	base := t.TempDir()
	outside = filepath.Join(base, "outside")
	require.NoError(t, os.Mkdir(outside, 0o777))
	require.NoError(t, os.Chmod(outside, 0o777))
	dir = filepath.Join(base, "seed")
	writeFile(t, filepath.Join(dir, "a.txt"), "a", 0o444)
	writeFile(t, filepath.Join(dir, "sub", "x.sh"), "x", 0o555)
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "sub", "out")))
	require.NoError(t, os.Chmod(filepath.Join(dir, "sub"), 0o555))
	require.NoError(t, os.Chmod(dir, 0o555))
	return dir, outside
}

func TestVerifyReadOnly(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		craft func(t *testing.T, dir string)
		ok    bool
	}{
		{"sealed tree with a link to a writable directory", func(*testing.T, string) {}, true},
		{"writable file", func(t *testing.T, dir string) { require.NoError(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o644)) }, false},
		{"group-writable file", func(t *testing.T, dir string) { require.NoError(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o464)) }, false},
		{"writable directory", func(t *testing.T, dir string) { require.NoError(t, os.Chmod(filepath.Join(dir, "sub"), 0o755)) }, false},
		{"writable root", func(t *testing.T, dir string) { require.NoError(t, os.Chmod(dir, 0o755)) }, false},
		{"file not readable by others", func(t *testing.T, dir string) { require.NoError(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o440)) }, false},
		{"directory not searchable by others", func(t *testing.T, dir string) { require.NoError(t, os.Chmod(filepath.Join(dir, "sub"), 0o554)) }, false},
		{"setuid file", func(t *testing.T, dir string) {
			require.NoError(t, unix.Chmod(filepath.Join(dir, "sub", "x.sh"), 0o4555))
		}, false},
		{"sticky directory", func(t *testing.T, dir string) { require.NoError(t, unix.Chmod(filepath.Join(dir, "sub"), 0o1555)) }, false},
		{"foreign owner", func(t *testing.T, dir string) {
			require.NoError(t, os.Lchown(filepath.Join(dir, "a.txt"), 65534, 65534))
		}, false},
		{"hard link", func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(filepath.Join(dir, "sub"), 0o755))
			require.NoError(t, os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "sub", "ln")))
			require.NoError(t, os.Chmod(filepath.Join(dir, "sub"), 0o555))
		}, false},
		{"fifo", func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(dir, 0o755))
			require.NoError(t, unix.Mkfifo(filepath.Join(dir, "p"), 0o444))
			require.NoError(t, os.Chmod(dir, 0o555))
		}, false},
		{"socket", func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(dir, 0o755))
			makeSocket(t, filepath.Join(dir, "s"))
			require.NoError(t, unix.Chmod(filepath.Join(dir, "s"), 0o555))
			require.NoError(t, os.Chmod(dir, 0o555))
		}, false},
		{"device", func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(dir, 0o755))
			require.NoError(t, unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o444, int(unix.Mkdev(1, 3))))
			require.NoError(t, os.Chmod(dir, 0o555))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := sealedTree(t)
			tc.craft(t, dir)
			err := VerifyReadOnly(ctx, dir)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			require.NoError(t, restoreWritable(ctx, dir))
			fi, err := os.Stat(outside)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o777), fi.Mode().Perm(), "the link target is never touched")
		})
	}
}

func TestVerifyReadOnlyRefusesASymlinkRoot(t *testing.T) {
	dir, _ := sealedTree(t)
	link := filepath.Join(t.TempDir(), "l")
	require.NoError(t, os.Symlink(dir, link))
	require.Error(t, VerifyReadOnly(context.Background(), link))
	require.NoError(t, restoreWritable(context.Background(), dir))
}

func TestVerifyReadOnlyDoesNotCrossMounts(t *testing.T) {
	dir, _ := sealedTree(t)
	require.NoError(t, restoreWritable(context.Background(), dir))
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o555))
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0555"))
	t.Cleanup(func() { assert.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH)) })
	for _, p := range []string{dir, filepath.Join(dir, "sub")} {
		require.NoError(t, os.Chmod(p, 0o555))
	}
	require.Error(t, VerifyReadOnly(context.Background(), dir), "a mount inside a seed is refused")
	require.Error(t, CopyTree(context.Background(), dir, filepath.Join(t.TempDir(), "c"), CopyLimits{}))
}

func TestReleaseRefusesToDescendIntoAMount(t *testing.T) {
	root := newPrivateRoot(t)
	mnt := filepath.Join(root, SeedsDirName, "abc", "mnt")
	require.NoError(t, os.MkdirAll(mnt, 0o755))
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
	mounted := true
	t.Cleanup(func() {
		if mounted {
			assert.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH))
		}
	})
	writeFile(t, filepath.Join(mnt, "precious"), "x", 0o644)
	require.Error(t, Release(context.Background(), root))
	assert.FileExists(t, filepath.Join(mnt, "precious"), "nothing behind a mount is removed")
	require.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH))
	mounted = false
	require.NoError(t, Release(context.Background(), root))
	assert.Empty(t, listDir(t, root))
}
