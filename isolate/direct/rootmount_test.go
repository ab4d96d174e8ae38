package direct_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/isolate/workspace/residency"
)

// TestRootPageCacheNotShared is the page-cache channel between two
// invocations (see isolatetest.RootPageCacheNotShared). The sandboxes' root
// tree is a ramfs whose pages no one can make cold, so the probe's positive
// control runs on the host, over a mount of the rootfs image (an erofs
// superblock whose pages evict does drop, as the roots of gvisor and docker
// are): it proves the receiver works on this host, and the two invocations
// must then decode at chance.
func TestRootPageCacheNotShared(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store := workspace.NewRootImages(filepath.Join(t.TempDir(), "fs"))
	t.Cleanup(func() { require.NoError(t, store.Close(context.Background())) })
	im, err := store.Image(ctx, testRootFS)
	require.NoError(t, err)
	mnt := filepath.Join(t.TempDir(), "image")
	require.NoError(t, im.Mount(ctx, mnt))
	t.Cleanup(func() { require.NoError(t, workspace.UnmountRoot(mnt)) })
	evict := func() {
		require.NoError(t, residency.EvictCarriers(testRootFS))
		require.NoError(t, residency.EvictCarriers(mnt))
	}
	onHost := func(mode residency.Mode, script []byte) isolate.Outcome {
		out := filepath.Join(t.TempDir(), "out")
		for _, r := range [][2]string{{`"/query/out"`, strconv.Quote(out)}, {`STDLIB = "/usr/lib/python3.11"`, "STDLIB = " + strconv.Quote(filepath.Join(mnt, "usr/lib/python3.11"))}} {
			require.True(t, bytes.Contains(script, []byte(r[0])), "the probe no longer says %s", r[0])
			script = bytes.Replace(script, []byte(r[0]), []byte(r[1]), 1)
		}
		cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-I", "-S", "-B", "-")
		cmd.Stdin = bytes.NewReader(script)
		stderr, err := cmd.CombinedOutput()
		if err != nil {
			return isolate.Outcome{Kind: isolate.KindNonzeroExit, Detail: err.Error(), Stderr: stderr}
		}
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		return isolate.Outcome{Kind: isolate.KindOK, Output: data}
	}
	isolatetest.RootPageCacheNotShared(t, 3, "invocation", evict, onHost, func(mode residency.Mode, script []byte) isolate.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: string(mode), Script: script}})
	})
}

// TestRootIsSharedReadOnlyTree checks that two live sandboxes run on the
// runtime's one root tree, a ramfs that is read-only at the superblock,
// whose pages a sandbox's own eviction request leaves resident; and that no
// mount and no loop device is left once they are destroyed (the state
// dir's leftover check runs at cleanup, after Sweep and Close).
func TestRootIsSharedReadOnlyTree(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var devs []uint64
	var sbs []isolate.Sandbox
	for i := 0; i < 2; i++ {
		sb, err := e.rt.Prepare(ctx, e.template(t, ""))
		require.NoError(t, err)
		sbs = append(sbs, sb)
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
		var st unix.Stat_t
		var sfs unix.Statfs_t
		var serr error
		var resident bool
		o := sb.Exec(ctx, isolate.Job{InvocationID: fmt.Sprint("tree", i), Script: []byte(okScript), OnStart: func(pid int) {
			root := fmt.Sprintf("/proc/%d/root/", pid)
			if serr = unix.Stat(root, &st); serr == nil {
				serr = unix.Statfs(root, &sfs)
			}
			if serr == nil {
				resident, serr = evictedStaysResident(filepath.Join(root, "usr/lib/python3.11/pydoc_data/topics.py"))
			}
		}})
		require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
		require.NoError(t, serr)
		require.EqualValues(t, unix.RAMFS_MAGIC, uint32(sfs.Type), "the sandbox root is not the ramfs tree")
		require.NotZero(t, sfs.Flags&unix.ST_RDONLY, "the sandbox root is writable")
		require.True(t, resident, "a page of the sandbox root was evicted")
		devs = append(devs, st.Dev)
	}
	require.Equal(t, devs[0], devs[1], "two live sandboxes on two roots: the tree is not shared")
	for _, sb := range sbs {
		require.NoError(t, sb.Destroy(ctx))
	}
	// Only the root store stays while the runtime is open.
	for _, m := range mountsUnder(t, e.state) {
		require.Contains(t, m, "/roots/", "mount %s left", m)
	}
	loops, err := workspace.LoopDevicesOf(e.state)
	require.NoError(t, err)
	require.Empty(t, loops, "a loop device outlives its sandbox")
}

// evictedStaysResident asks the kernel to drop page 0 of p, through the
// sandbox's own mount of it, and reports whether the page is still
// resident (mincore).
func evictedStaysResident(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return false, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return false, err
	}
	defer func() { _ = unix.Munmap(m) }()
	var vec [1]byte
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), 4096, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return false, fmt.Errorf("mincore: %w", e)
	}
	return vec[0]&1 == 1, nil
}
