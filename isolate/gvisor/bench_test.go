package gvisor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// benchScript writes a small answer.
const benchScript = "open('/query/out', 'w').write('{\"n\": 1}')\n"

// newBench returns what the benchmarks share: a probed runtime, the
// template over the test rootfs, and the job that runs benchScript.
func newBench(b *testing.B, repo string) (*Runtime, isolate.Template, isolate.Job) {
	r := newTestRuntime(b)
	tpl := template(b, r, repo)
	require.NoError(b, r.Probe(context.Background()))
	return r, tpl, isolate.Job{InvocationID: "bench", Script: []byte(benchScript)}
}

// BenchmarkRunTrivial measures one full Run (prepare, boot, hand-over, read,
// destroy) of a script that writes a small answer, and reports the median.
func BenchmarkRunTrivial(b *testing.B) {
	r, tpl, job := newBench(b, "")
	ctx := context.Background()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, d := isolatetest.TimedRun(ctx, b, fmt.Sprintf("run %d", i), r, tpl, job)
		durs = append(durs, d)
	}
	b.StopTimer()
	isolatetest.ReportMedian(b, "median-ms", durs)
}

// BenchmarkPrepared measures what a request pays with a sandbox prepared
// ahead (a warm pool of one): Exec and Destroy of a sandbox that was
// prepared, and left idle, before the clock starts. Cold runs (Run:
// prepare, Exec, destroy) are interleaved in the same loop. It reports
// the medians of both, their ratio, and the prepared path's phases.
func BenchmarkPrepared(b *testing.B) { benchPrepared(b, "") }

// BenchmarkPreparedRepo is BenchmarkPrepared over seeds of 10 and 10,000
// files (100,000 with AWF_BENCH_LARGE=1): what a sandbox's repository view
// costs in the measured window (its unmount at Destroy) and in Prepare.
func BenchmarkPreparedRepo(b *testing.B) {
	for _, n := range isolatetest.SeedSizes() {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) { benchPrepared(b, isolatetest.BenchSeed(b, n)) })
	}
}

// benchPrepared is BenchmarkPrepared over the seed repo ("" for none).
func benchPrepared(b *testing.B, repo string) {
	r, tpl, job := newBench(b, repo)
	ctx := context.Background()
	var warm, cold, start, run, destroy, prep []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p0 := time.Now()
		sb, err := r.Prepare(ctx, tpl)
		prep = append(prep, time.Since(p0))
		require.NoError(b, err)
		// A pooled sandbox waits idle for its request.
		time.Sleep(100 * time.Millisecond)
		b.StartTimer()
		t0 := time.Now()
		o := sb.Exec(ctx, job)
		t1 := time.Now()
		derr := sb.Destroy(ctx)
		warm = append(warm, time.Since(t0))
		destroy = append(destroy, time.Since(t1))
		start, run = append(start, o.Timings.Start), append(run, o.Timings.Run)
		require.NoError(b, derr)
		if o.Kind != isolate.KindOK {
			b.Fatalf("prepared %d: %s: %s %s", i, o.Kind, o.Detail, o.Stderr)
		}
		b.StopTimer()
		_, d := isolatetest.TimedRun(ctx, b, fmt.Sprintf("cold %d", i), r, tpl, job)
		cold = append(cold, d)
		b.StartTimer()
	}
	b.StopTimer()
	isolatetest.ReportMedian(b, "prepared-ms", warm)
	isolatetest.ReportMedian(b, "cold-ms", cold)
	b.ReportMetric(isolatetest.Median(cold).Seconds()/isolatetest.Median(warm).Seconds(), "cold/prepared")
	isolatetest.ReportMedian(b, "prepare-ms", prep)
	isolatetest.ReportMedian(b, "handover-ms", start)
	isolatetest.ReportMedian(b, "run-ms", run)
	isolatetest.ReportMedian(b, "destroy-ms", destroy)
}

// BenchmarkRunTreeWalk measures full Runs over a 10,000-file seed: the
// trivial script and the tree walk, each with the /query and /query/repo
// binds exclusive to the Sentry (hintExclusive) and shared (runsc's
// default), interleaved in one loop so that a loaded host moves all four
// alike. It reports the medians and the walk's shared/exclusive ratio.
func BenchmarkRunTreeWalk(b *testing.B) {
	r := newTestRuntime(b)
	tpl := template(b, r, isolatetest.BenchSeed(b, 10_000))
	tpl.Limits.Wall = 60 * time.Second
	require.NoError(b, r.Probe(context.Background()))
	ctx := context.Background()
	// The first Run copies the seed into the runtime's view: untimed.
	o := r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "warm", Script: []byte(benchScript)}})
	require.Equal(b, isolate.KindOK, o.Kind, "%s %s", o.Detail, o.Stderr)
	durs := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, shared := range []bool{false, true} {
			r.testOnlySharedBinds = shared
			mode := map[bool]string{false: "exclusive", true: "shared"}[shared]
			for _, w := range []struct{ name, script, want string }{{"trivial", benchScript, `{"n": 1}`}, {"walk", isolatetest.TreeWalkScript, "true"}} {
				t0 := time.Now()
				o := r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "bench", Script: []byte(w.script)}})
				durs[w.name+"-"+mode] = append(durs[w.name+"-"+mode], time.Since(t0))
				if o.Kind != isolate.KindOK || string(o.Output) != w.want {
					b.Fatalf("%s %s %d: %s: %s %q %s", w.name, mode, i, o.Kind, o.Detail, o.Output, o.Stderr)
				}
			}
		}
	}
	b.StopTimer()
	r.testOnlySharedBinds = false
	for _, k := range []string{"trivial-exclusive", "trivial-shared", "walk-exclusive", "walk-shared"} {
		isolatetest.ReportMedian(b, k+"-ms", durs[k])
	}
	b.ReportMetric(isolatetest.Median(durs["walk-shared"]).Seconds()/isolatetest.Median(durs["walk-exclusive"]).Seconds(), "walk-shared/exclusive")
}
