package docker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/gvisor"
)

func init() {
	// The side-by-side benchmark runs the direct runtime too, and
	// libcontainer re-executes this test binary as the container init.
	direct.InitIfRequested()
}

// benchScript lists the repository and writes a JSON answer (the same
// script the direct runtime's benchmark runs).
const benchScript = `import os, json
json.dump({"files": len(os.listdir("repo"))}, open("out", "w"))
`

// BenchmarkRuntimes runs the same script end to end (prepare, run, read,
// destroy) through the direct, gvisor and docker runtimes, side by side in
// one run, each over the same rootfs, seed and policy. Each reports its
// median latency and the median of each phase.
func BenchmarkRuntimes(b *testing.B) {
	seed := filepath.Join(b.TempDir(), "seed")
	require.NoError(b, os.MkdirAll(filepath.Join(seed, "src"), 0o755))
	for _, f := range []string{"README", "src/a.py", "src/b.py"} {
		require.NoError(b, os.WriteFile(filepath.Join(seed, f), []byte("x = 1\n"), 0o444))
	}
	pol := testPolicy(b)
	b.Cleanup(func() {
		// The parent cgroups the runtimes made for the benchmark, once empty.
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/awf-bench")
		for _, d := range append(dirs, "/sys/fs/cgroup/awf-bench") {
			_ = os.Remove(d)
		}
	})
	open := map[string]func(isolate.HostConfig) (isolate.Runtime, error){
		"direct": direct.New,
		"gvisor": gvisor.New,
		"docker": New,
	}
	for _, name := range []string{"direct", "gvisor", "docker"} {
		b.Run(name, func(b *testing.B) {
			runID := randomID(b)
			rt, err := open[name](isolate.HostConfig{
				RunID: runID, StateDir: b.TempDir(), CgroupParent: "awf-bench", DockerSocket: testSocket,
			})
			require.NoError(b, err)
			ctx := context.Background()
			require.NoError(b, rt.Probe(ctx), "runtime %s", name)
			b.Cleanup(func() {
				require.NoError(b, rt.Sweep(context.Background()))
				require.NoError(b, rt.Close())
			})
			tpl := isolate.Template{RunID: runID, RootFS: testRoot, Repo: seed, Limits: isolate.DefaultLimits(), Policy: pol}
			// One untimed run warms caches (for docker: the rootfs image).
			o := rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "warm", Script: []byte(benchScript)}})
			require.Equal(b, isolate.KindOK, o.Kind, "%s: %s %s", name, o.Detail, o.Stderr)
			var total, prep, start, run, destroy []time.Duration
			for b.Loop() {
				t0 := time.Now()
				o := rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "bench", Script: []byte(benchScript)}})
				total = append(total, time.Since(t0))
				if o.Kind != isolate.KindOK {
					b.Fatalf("%s: outcome %s: %s %s", name, o.Kind, o.Detail, o.Stderr)
				}
				prep = append(prep, o.Timings.Prepare)
				start = append(start, o.Timings.Start)
				run = append(run, o.Timings.Run)
				destroy = append(destroy, o.Timings.Destroy)
			}
			report(b, "median-ms", total)
			report(b, "prepare-ms", prep)
			report(b, "start-ms", start)
			report(b, "run-ms", run)
			report(b, "destroy-ms", destroy)
		})
	}
}

// report adds the median of ds, in milliseconds, as a benchmark metric.
func report(b *testing.B, unit string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	b.ReportMetric(float64(s[len(s)/2])/float64(time.Millisecond), unit)
}
