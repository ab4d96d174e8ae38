package timingcheck

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
)

func init() {
	// libcontainer re-executes this test binary as the container init.
	direct.InitIfRequested()
}

// testRootFS is built once for the package.
var testRootFS string

func TestMain(m *testing.M) {
	os.Exit(isolatetest.WithRootFS("awf-timing-rootfs-", func(r *isolatetest.RootFS) int {
		testRootFS = r.Dir
		return m.Run()
	}))
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
	runID := isolatetest.RandomID(t)
	rt, err := direct.New(isolate.HostConfig{RunID: runID, StateDir: t.TempDir()})
	require.NoError(t, err)
	isolatetest.SweepAtCleanup(t, rt, 30*time.Second, func() { require.NoError(t, rt.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, rt.Probe(ctx))
	rep, err := Run(ctx, Options{
		Runtime:  rt,
		Template: isolate.Template{RunID: runID, RootFS: testRootFS, Limits: isolate.DefaultLimits(), Policy: isolatetest.Policy(t)},
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
