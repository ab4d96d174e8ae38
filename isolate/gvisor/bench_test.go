package gvisor

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// BenchmarkRunTrivial measures one full Run (prepare, runsc run, read,
// destroy) of a script that writes a small answer, and reports the median.
func BenchmarkRunTrivial(b *testing.B) {
	r := newTestRuntime(b)
	tpl := template(b, r, "")
	ctx := context.Background()
	require.NoError(b, r.Probe(ctx))
	job := isolate.Job{InvocationID: "bench", Script: []byte("open('/query/out', 'w').write('{\"n\": 1}')\n")}
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		o := r.Run(ctx, isolate.Spec{Template: tpl, Job: job})
		durs = append(durs, time.Since(t0))
		if o.Kind != isolate.KindOK {
			b.Fatalf("run %d: %s: %s %s", i, o.Kind, o.Detail, o.Stderr)
		}
	}
	b.StopTimer()
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "median-ms")
}
