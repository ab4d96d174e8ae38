package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/gvisor"
	"github.com/awf-project/awf/isolate/isolatetest"
)

func init() {
	// The side-by-side benchmark runs the direct runtime too, and
	// libcontainer re-executes this test binary as the container init.
	direct.InitIfRequested()
}

// BenchmarkRuntimes runs the same script end to end (prepare, run, read,
// destroy) through the direct, gvisor and docker runtimes over the same
// rootfs, seed and policy. The three are interleaved within each iteration,
// so that load on the machine hits them alike. It reports each runtime's
// median and the ratios of the medians to direct's.
func BenchmarkRuntimes(b *testing.B) {
	seed := filepath.Join(b.TempDir(), "seed")
	require.NoError(b, os.MkdirAll(filepath.Join(seed, "src"), 0o755))
	for _, f := range []string{"README", "src/a.py", "src/b.py"} {
		require.NoError(b, os.WriteFile(filepath.Join(seed, f), []byte("x = 1\n"), 0o444))
	}
	pol := isolatetest.Policy(b)
	b.Cleanup(func() {
		// The parent cgroups the runtimes made for the benchmark, once empty.
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/awf-bench")
		for _, d := range append(dirs, "/sys/fs/cgroup/awf-bench") {
			_ = os.Remove(d)
		}
	})
	names := []string{"direct", "gvisor", "docker"}
	open := map[string]func(isolate.HostConfig) (isolate.Runtime, error){
		"direct": direct.New,
		"gvisor": gvisor.New,
		"docker": New,
	}
	ctx := context.Background()
	rts := map[string]isolate.Runtime{}
	tpls := map[string]isolate.Template{}
	for _, name := range names {
		runID := isolatetest.RandomID(b)
		rt, err := open[name](isolate.HostConfig{
			RunID: runID, StateDir: b.TempDir(), CgroupParent: "awf-bench", DockerSocket: testSocket,
		})
		require.NoError(b, err)
		require.NoError(b, rt.Probe(ctx), "runtime %s", name)
		b.Cleanup(func() {
			require.NoError(b, rt.Sweep(context.Background()))
			require.NoError(b, rt.Close())
		})
		rts[name] = rt
		tpls[name] = isolate.Template{RunID: runID, RootFS: testRoot, Repo: seed, Limits: isolate.DefaultLimits(), Policy: pol}
		// One untimed run warms caches (for docker: the rootfs image).
		o := rt.Run(ctx, isolate.Spec{Template: tpls[name], Job: isolate.Job{InvocationID: "warm", Script: []byte(isolatetest.BenchScript)}})
		require.Equal(b, isolate.KindOK, o.Kind, "%s: %s %s", name, o.Detail, o.Stderr)
	}
	total := map[string][]time.Duration{}
	for b.Loop() {
		for _, name := range names {
			_, d := isolatetest.TimedRun(ctx, b, name, rts[name], tpls[name], isolate.Job{InvocationID: "bench", Script: []byte(isolatetest.BenchScript)})
			total[name] = append(total[name], d)
		}
	}
	for _, name := range names {
		isolatetest.ReportMedian(b, name+"-ms", total[name])
	}
	if d := isolatetest.Median(total["direct"]); d > 0 {
		b.ReportMetric(float64(isolatetest.Median(total["gvisor"]))/float64(d), "gvisor/direct")
		b.ReportMetric(float64(isolatetest.Median(total["docker"]))/float64(d), "docker/direct")
	}
}

// BenchmarkRunRepo measures the docker runtime alone over seeds of 10 and
// 10,000 files (100,000 with AWF_BENCH_LARGE=1): a cold Run (prepare,
// create, start, wait, read, destroy), and, interleaved with it, a sandbox
// prepared ahead, as the warm pool holds one, whose Exec and Destroy are
// what a request then pays. It reports the medians of both and their
// phases: what a sandbox's repository costs, and whether that grows with
// the seed.
func BenchmarkRunRepo(b *testing.B) {
	for _, n := range isolatetest.SeedSizes() {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) { benchRunRepo(b, isolatetest.BenchSeed(b, n)) })
	}
}

func benchRunRepo(b *testing.B, seed string) {
	r := newTestRuntime(b)
	tpl := template(b, r, seed)
	ctx := context.Background()
	require.NoError(b, r.Warm(ctx, tpl))
	job := isolate.Job{InvocationID: "bench", Script: []byte(isolatetest.BenchScript)}
	var cold, prep, warm, start, runs, destroy []time.Duration
	for b.Loop() {
		t0 := time.Now()
		o := r.Run(ctx, isolate.Spec{Template: tpl, Job: job})
		cold = append(cold, time.Since(t0))
		if o.Kind != isolate.KindOK {
			b.Fatalf("cold: %s: %s %s", o.Kind, o.Detail, o.Stderr)
		}
		t0 = time.Now()
		sb, err := r.Prepare(ctx, tpl)
		prep = append(prep, time.Since(t0))
		require.NoError(b, err)
		t0 = time.Now()
		o = sb.Exec(ctx, job)
		t1 := time.Now()
		derr := sb.Destroy(ctx)
		warm, destroy = append(warm, time.Since(t0)), append(destroy, time.Since(t1))
		start, runs = append(start, o.Timings.Start), append(runs, o.Timings.Run)
		require.NoError(b, derr)
		if o.Kind != isolate.KindOK {
			b.Fatalf("prepared: %s: %s %s", o.Kind, o.Detail, o.Stderr)
		}
	}
	isolatetest.ReportMedian(b, "cold-ms", cold)
	isolatetest.ReportMedian(b, "prepare-ms", prep)
	isolatetest.ReportMedian(b, "prepared-ms", warm)
	isolatetest.ReportMedian(b, "start-ms", start)
	isolatetest.ReportMedian(b, "run-ms", runs)
	isolatetest.ReportMedian(b, "destroy-ms", destroy)
}
