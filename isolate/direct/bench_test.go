package direct_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// benchScript lists the repository and writes a JSON answer, relative to its
// working directory so that the same bytes run in every variant.
const benchScript = `import os, json
json.dump({"files": len(os.listdir("repo"))}, open("out", "w"))
`

// BenchmarkTrivialScript runs the same script end to end through the direct
// runtime, bare on the host, and under bubblewrap, side by side. Each
// sub-benchmark reports its median latency; direct also reports the median
// of each phase.
func BenchmarkTrivialScript(b *testing.B) {
	repo := seedRepo(b)
	b.Run("direct", func(b *testing.B) {
		e := newEnv(b)
		tpl := e.template(b, repo)
		ctx := context.Background()
		var total, prep, start, run, read, destroy []time.Duration
		for b.Loop() {
			t0 := time.Now()
			o := e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "bench", Script: []byte(benchScript)}})
			total = append(total, time.Since(t0))
			if o.Kind != isolate.KindOK {
				b.Fatalf("outcome %s: %s", o.Kind, o.Detail)
			}
			prep = append(prep, o.Timings.Prepare)
			start = append(start, o.Timings.Start)
			run = append(run, o.Timings.Run)
			read = append(read, o.Timings.Read)
			destroy = append(destroy, o.Timings.Destroy)
		}
		report(b, "median-ms", total)
		report(b, "prepare-ms", prep)
		report(b, "start-ms", start)
		report(b, "run-ms", run)
		report(b, "read-ms", read)
		report(b, "destroy-ms", destroy)
	})
	b.Run("bare", func(b *testing.B) {
		dir := b.TempDir()
		require.NoError(b, os.Symlink(repo, filepath.Join(dir, "repo")))
		script := filepath.Join(dir, "query-script.py")
		require.NoError(b, os.WriteFile(script, []byte(benchScript), 0o644))
		var total []time.Duration
		for b.Loop() {
			t0 := time.Now()
			cmd := exec.Command("/usr/bin/python3", "-I", "-S", "-B", script)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=/usr/bin", "LANG=C.UTF-8"}
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			total = append(total, time.Since(t0))
		}
		report(b, "median-ms", total)
	})
	b.Run("bwrap", func(b *testing.B) {
		bwrap, err := exec.LookPath("bwrap")
		require.NoError(b, err, "bubblewrap is needed for the side-by-side benchmark")
		dir := b.TempDir()
		awf := filepath.Join(dir, "awf")
		require.NoError(b, os.Mkdir(awf, 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(awf, "query-script.py"), []byte(benchScript), 0o644))
		var total []time.Duration
		for b.Loop() {
			query := filepath.Join(dir, "query")
			require.NoError(b, os.RemoveAll(query))
			require.NoError(b, os.Mkdir(query, 0o777))
			t0 := time.Now()
			cmd := exec.Command(bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
				"--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--hostname", "sandbox",
				"--ro-bind", testRootFS, "/", "--proc", "/proc", "--dev", "/dev",
				"--size", "16777216", "--tmpfs", "/tmp", "--bind", query, "/query", "--ro-bind", repo, "/query/repo",
				"--ro-bind", awf, "/awf", "--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv", "LANG", "C.UTF-8",
				"--chdir", "/query", "/usr/bin/python3", "-I", "-S", "-B", isolate.ScriptPath)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			total = append(total, time.Since(t0))
		}
		report(b, "median-ms", total)
	})
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
