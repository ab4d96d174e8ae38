package verify

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/policy"
)

// BenchmarkProbeOverhead measures what verify adds to one sandbox run: the
// same ctl/python job run bare through Runtime.Run, and as a probe (render,
// proto check and canonicalisation, OnStart bookkeeping, the leftover scan).
// The two alternate within each iteration so load hits them alike.
func BenchmarkProbeOverhead(b *testing.B) {
	ctx := context.Background()
	pol, err := policy.Default()
	require.NoError(b, err)
	fx, err := newFixture("")
	require.NoError(b, err)
	defer fx.close()
	h := isolate.HostConfig{RunID: "verify-bench-" + randHex(6), StateDir: b.TempDir(), CgroupParent: "awf"}
	rt, err := runtimes.Open("direct", h)
	require.NoError(b, err)
	defer rt.Close()
	p := Battery()[0]
	require.Equal(b, "ctl/python", p.ID)
	prm := params{Query: isolate.QueryDir, Repo: isolate.RepoDir, Out: isolate.OutputPath, Errnos: errnoVocab}
	bt := &battery{
		name: "direct", rt: rt, fx: fx, prm: prm, pol: pol,
		base: isolate.Template{RunID: h.RunID, RootFS: testRootFS, Repo: fx.seed, Limits: isolate.DefaultLimits(), Policy: pol},
		scan: newLeftoverScanner(h.StateDir, h.RunID, "awf", []string{fx.dir, h.StateDir}),
	}
	prm.Limits = p.effectiveLimits()
	script, err := p.render(prm)
	require.NoError(b, err)
	tmpl := bt.base
	tmpl.Limits = prm.Limits
	var bare, probe time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		o := rt.Run(ctx, isolate.Spec{Template: tmpl, Job: isolate.Job{InvocationID: "bench-" + randHex(4), Script: script}})
		bare += time.Since(t0)
		require.Equal(b, isolate.KindOK, o.Kind, o.Detail)
		t1 := time.Now()
		r, _ := bt.runProbe(ctx, p, nil)
		probe += time.Since(t1)
		require.Equal(b, Pass, r.Status, r.Evidence)
	}
	b.ReportMetric(float64(bare.Microseconds())/float64(b.N)/1000, "bare-ms/op")
	b.ReportMetric(float64(probe.Microseconds())/float64(b.N)/1000, "probe-ms/op")
	b.ReportMetric(float64(probe)/float64(bare), "probe/bare")
}
