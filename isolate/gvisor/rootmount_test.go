package gvisor

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate/workspace"
)

// TestBundleRootIsOwnMount checks that two prepared sandboxes get two
// erofs mounts as their bundle roots, and that Destroy removes each (the
// cleanup then checks that Sweep and Close leave no mount or loop device).
func TestBundleRootIsOwnMount(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sbs []*sandbox
	for i := 0; i < 2; i++ {
		sb, err := r.Prepare(ctx, template(t, r, ""))
		require.NoError(t, err)
		sbs = append(sbs, sb.(*sandbox))
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	}
	require.NotEqual(t, sbs[0].rootFS, sbs[1].rootFS)
	for _, sb := range sbs {
		require.Equal(t, sb.ws.Path(workspace.RootMountName), sb.rootFS)
		require.Equal(t, "erofs", mountType(t, sb.rootFS), "bundle root %s", sb.rootFS)
	}
	for _, sb := range sbs {
		require.NoError(t, sb.Destroy(ctx))
		require.Empty(t, mountType(t, sb.rootFS), "bundle root %s left mounted", sb.rootFS)
	}
}

// mountType is the type of the mount at p in this thread's mount table, or "".
func mountType(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		for i := 6; i < len(f); i++ {
			if f[i] == "-" && len(f) > i+1 && f[4] == p {
				return f[i+1]
			}
		}
	}
	return ""
}
