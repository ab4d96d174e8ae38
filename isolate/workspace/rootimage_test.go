package workspace

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/rootfs"
)

// carrier is a stdlib file of several pages that nothing here reads.
const carrier = "usr/lib/python3.11/pydoc_data/topics.py"

// TestRootMountsHaveOwnPageCache proves from the host, on both mount paths
// (straight from the image file, and through a loop device per mount),
// that two mounts of one image are two superblocks: a page read through
// one is resident there and not in the other. A bind of the first mount,
// which is what sandboxes shared before, does see it: the check can fail.
func TestRootMountsHaveOwnPageCache(t *testing.T) {
	root := buildTestRoot(t)
	for _, loop := range []bool{false, true} {
		name := map[bool]string{false: "file-backed", true: "loop"}[loop]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := NewRootImages(filepath.Join(dir, "fs"))
			s.TestOnlyLoop = loop
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t.Cleanup(func() {
				require.NoError(t, s.Close(context.Background()))
				requireNoRootMounts(t, dir)
			})
			im, err := s.Image(ctx, root)
			require.NoError(t, err)
			again, err := s.Image(ctx, root)
			require.NoError(t, err)
			require.Same(t, im, again, "one image per rootfs")
			if !loop && fileBackedKernel(t) {
				require.False(t, im.loop, "this kernel mounts erofs from a file (6.12+): the loop path should not be needed")
			} else if !loop {
				t.Logf("kernel before 6.12: file-backed erofs mounts fall back to loop devices (im.loop=%v)", im.loop)
			}
			a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
			require.NoError(t, im.Mount(ctx, a))
			t.Cleanup(func() { require.NoError(t, UnmountRoot(a)) })
			require.NoError(t, im.Mount(ctx, b))
			t.Cleanup(func() { require.NoError(t, UnmountRoot(b)) })
			require.NoError(t, os.Mkdir(c, 0o700))
			require.NoError(t, unix.Mount(a, c, "", unix.MS_BIND, ""))
			t.Cleanup(func() { require.NoError(t, UnmountRoot(c)) })

			require.NotEqual(t, statDev(t, filepath.Join(a, carrier)), statDev(t, filepath.Join(b, carrier)), "two mounts, one superblock")
			require.False(t, resident(t, filepath.Join(a, carrier)))
			require.False(t, resident(t, filepath.Join(b, carrier)))
			readPage(t, filepath.Join(a, carrier))
			require.True(t, resident(t, filepath.Join(a, carrier)), "a page just read is resident")
			require.True(t, resident(t, filepath.Join(c, carrier)), "a bind shares the page cache: the probe must see it")
			require.False(t, resident(t, filepath.Join(b, carrier)), "a page read through one mount is resident in another")

			if loop {
				loops, err := LoopDevicesOf(dir)
				require.NoError(t, err)
				require.Len(t, loops, 2, "one loop device per mount")
			}
		})
	}
}

// TestRootImageRecordsDigest checks that Image reports, and records next
// to the image, which tree the image holds and the image file's digest.
func TestRootImageRecordsDigest(t *testing.T) {
	root := buildTestRoot(t)
	dir := t.TempDir()
	s := NewRootImages(filepath.Join(dir, "fs"))
	defer func() { require.NoError(t, s.Close(context.Background())) }()
	ctx := context.Background()
	im, err := s.Image(ctx, root)
	require.NoError(t, err)
	want, err := rootfs.Verify(ctx, root, "")
	require.NoError(t, err)
	require.Equal(t, want, im.Info.RootDigest)
	rec, err := os.ReadFile(im.Path + ".digest")
	require.NoError(t, err)
	require.Contains(t, string(rec), want)
	require.Contains(t, string(rec), im.Info.FileDigest)
}

// fileBackedKernel reports whether the running kernel is 6.12 or later,
// the first with file-backed erofs mounts.
func fileBackedKernel(t *testing.T) bool {
	t.Helper()
	var u unix.Utsname
	require.NoError(t, unix.Uname(&u))
	var major, minor int
	_, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	require.NoError(t, err)
	return major > 6 || major == 6 && minor >= 12
}

func buildTestRoot(t *testing.T) string {
	t.Helper()
	return buildTestRootTB(t)
}

func buildTestRootTB(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := rootfs.Build(ctx, rootfs.Options{Out: root})
	require.NoError(t, err)
	return root
}

func statDev(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(p, &st))
	return st.Dev
}

func readPage(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.ReadAt(make([]byte, 4096), 0)
	require.NoError(t, err)
}

// resident reports whether page 0 of p is in its page cache (mincore).
func resident(t *testing.T, p string) bool {
	t.Helper()
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	var vec [1]byte
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), 4096, uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, e, "mincore")
	return vec[0]&1 == 1
}

// requireNoRootMounts fails when any mount or loop device below dir remains.
func requireNoRootMounts(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		require.False(t, len(fs) > 4 && strings.HasPrefix(fs[4], dir), "mount left: %s", sc.Text())
	}
	loops, err := LoopDevicesOf(dir)
	require.NoError(t, err)
	require.Empty(t, loops, "loop devices left")
}
