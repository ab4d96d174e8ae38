package timingcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/rootfs"
)

func init() {
	// libcontainer re-executes this test binary as the container init.
	direct.InitIfRequested()
}

// testRootFS is built once for the package.
var testRootFS string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "awf-timing-rootfs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testRootFS = filepath.Join(dir, "root")
	if _, err := rootfs.Build(ctx, rootfs.Options{Out: testRootFS}); err != nil {
		fmt.Fprintln(os.Stderr, "build test rootfs:", err)
		return 1
	}
	return m.Run()
}

// TestTimingCheckDirect runs the check through a real broker on the direct
// runtime with a small N and checks that it measured what it claims: every
// request answered, one audit record each, the slow class told apart inside
// the broker (the check has power). Whether the host's buckets hold is the
// check's verdict, a timing judgement that a test must not assert (it is
// logged); TestJudge proves the verdicts on fixed samples.
func TestTimingCheckDirect(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the timing check builds real sandboxes: run as root")
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	runID := "t" + hex.EncodeToString(b)
	rt, err := direct.New(isolate.HostConfig{RunID: runID, StateDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, rt.Sweep(ctx))
		require.NoError(t, rt.Close())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, rt.Probe(ctx))
	pol, err := policy.Default()
	require.NoError(t, err)
	rep, err := Run(ctx, Options{
		Runtime:  rt,
		Template: isolate.Template{RunID: runID, RootFS: testRootFS, Limits: isolate.DefaultLimits(), Policy: pol},
		N:        12,
		Progress: func(s string) { t.Log(s) },
	})
	require.NoError(t, err)
	t.Logf("%s", rep.Text())
	require.Len(t, rep.Samples, 24)
	classes := map[string]int{}
	for _, s := range rep.Samples {
		require.True(t, s.OK, "every request answers ok: %+v", s)
		require.Positive(t, s.ElapsedMs)
		classes[s.Class]++
	}
	require.Equal(t, map[string]int{"fast": 12, "slow": 12}, classes)
	require.Less(t, rep.Elapsed.P, rep.Alpha, "the slow script must be told apart inside the broker")
	require.Equal(t, 200, rep.Jitter.Wakes)
	require.NotContains(t, fmt.Sprint(rep.Failures), "no power")
}
