package direct_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/isolate/workspace/residency"
)

// erofsMagic is EROFS_SUPER_MAGIC_V1.
const erofsMagic = 0xE0F5E1E2

// TestRootPageCacheNotShared is the page-cache channel between two
// invocations (see isolatetest.RootPageCacheNotShared).
func TestRootPageCacheNotShared(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	evict := func() { require.NoError(t, residency.EvictCarriers(testRootFS)) }
	isolatetest.RootPageCacheNotShared(t, 1, "invocation", evict, func(mode residency.Mode, script []byte) isolate.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: string(mode), Script: script}})
	})
}

// TestRootIsOwnMount checks that two live sandboxes run on two erofs
// superblocks, and that neither the root mounts nor any loop device (on
// kernels without file-backed erofs) are left once they are destroyed; the
// state dir's leftover check runs at cleanup, after Sweep and Close.
func TestRootIsOwnMount(t *testing.T) {
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
		o := sb.Exec(ctx, isolate.Job{InvocationID: fmt.Sprint("own", i), Script: []byte(okScript), OnStart: func(pid int) {
			root := fmt.Sprintf("/proc/%d/root/", pid)
			if serr = unix.Stat(root, &st); serr == nil {
				serr = unix.Statfs(root, &sfs)
			}
		}})
		require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
		require.NoError(t, serr)
		require.EqualValues(t, erofsMagic, uint32(sfs.Type), "the sandbox root is not an erofs mount")
		devs = append(devs, st.Dev)
	}
	require.NotEqual(t, devs[0], devs[1], "two live sandboxes share a root superblock")
	for _, sb := range sbs {
		require.NoError(t, sb.Destroy(ctx))
	}
	// Only the image store's ramfs stays while the runtime is open.
	for _, m := range mountsUnder(t, e.state) {
		require.Contains(t, m, "/roots/", "mount %s left", m)
	}
	loops, err := workspace.LoopDevicesOf(e.state)
	require.NoError(t, err)
	require.Empty(t, loops, "a loop device outlives its sandbox")
}
