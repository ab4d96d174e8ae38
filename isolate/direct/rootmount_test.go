package direct_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/isolate/workspace/residency"
)

// erofsMagic is EROFS_SUPER_MAGIC_V1.
const erofsMagic = 0xE0F5E1E2

// TestRootPageCacheNotShared is the page-cache channel between two
// invocations. The host first drops the carrier files from its page cache
// (as memory pressure does to rarely read files); the sender then loads
// the first page of each file its secret's set bits name, and the receiver
// times each page's first read (and uses mincore where the policy allows
// it). Every sandbox reads its root through a superblock of its own, so
// the receiver must decode at chance; on the shared root this decoded
// 64/64 on every runtime. The probe run as one invocation must decode the
// secret, so the receiver is known to work on this host.
func TestRootPageCacheNotShared(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	probe := func(mode residency.Mode, secret uint64) isolate.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		o := e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: string(mode), Script: residency.Script(mode, secret)}})
		require.Equal(t, isolate.KindOK, o.Kind, "%s: %s\nstderr: %s", mode, o.Detail, o.Stderr)
		return o
	}

	control, err := residency.Secret()
	require.NoError(t, err)
	require.NoError(t, residency.EvictCarriers(testRootFS))
	r, err := residency.Parse(probe(residency.Both, control).Output)
	require.NoError(t, err)
	t.Logf("positive control (one invocation): %d/64 by timing, ns %v", residency.Correct(r.Timing, control), r.Ns)
	require.GreaterOrEqual(t, residency.Correct(r.Timing, control), residency.ControlMin,
		"the receiver cannot tell a page it loaded itself: the probe proves nothing here")

	secret, err := residency.Secret()
	require.NoError(t, err)
	require.NoError(t, residency.EvictCarriers(testRootFS))
	probe(residency.Send, secret)
	r, err = residency.Parse(probe(residency.Recv, 0).Output)
	require.NoError(t, err)
	got := residency.Correct(r.Timing, secret)
	t.Logf("two invocations: %d/64 by timing, ns %v", got, r.Ns)
	require.LessOrEqual(t, got, residency.ChanceMax, "a later invocation reads the pages an earlier one loaded")
	if r.Mincore != nil {
		require.LessOrEqual(t, residency.Correct(*r.Mincore, secret), residency.ChanceMax, "mincore shows an earlier invocation's pages")
	}
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
