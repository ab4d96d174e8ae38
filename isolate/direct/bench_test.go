package direct_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// BenchmarkTrivialScript runs the same script end to end through the direct
// runtime, bare on the host interpreter, and under bubblewrap. The three run
// interleaved within each iteration, so that load on a shared machine hits
// them alike; the benchmark reports the median of each (ms), the ratio of
// the direct median to the bubblewrap median, and the median of each phase
// of the direct runtime. One op is one run of each variant.
func BenchmarkTrivialScript(b *testing.B) {
	e, tpl, bare, repo := newBench(b)
	ctx := context.Background()
	bw := newBwrapVariant(b, repo)

	var direct, bareT, bwrapT, prep, start, run, read, destroy []time.Duration
	for b.Loop() {
		o, d := isolatetest.TimedRun(ctx, b, "direct", e.rt, tpl, isolate.Job{InvocationID: "bench", Script: []byte(benchScript)})
		direct = append(direct, d)
		prep = append(prep, o.Timings.Prepare)
		start = append(start, o.Timings.Start)
		run = append(run, o.Timings.Run)
		read = append(read, o.Timings.Read)
		destroy = append(destroy, o.Timings.Destroy)
		bareT = append(bareT, bare(b))
		bwrapT = append(bwrapT, bw(b))
	}
	report(b, "direct-ms", direct)
	report(b, "bare-ms", bareT)
	report(b, "bwrap-ms", bwrapT)
	b.ReportMetric(isolatetest.Median(direct).Seconds()/isolatetest.Median(bwrapT).Seconds(), "direct/bwrap")
	report(b, "prepare-ms", prep)
	report(b, "start-ms", start)
	report(b, "run-ms", run)
	report(b, "read-ms", read)
	report(b, "destroy-ms", destroy)
}

// BenchmarkPreparedAhead measures what a warm pool buys: Exec and Destroy
// of a sandbox prepared ahead (its interpreter already started and waiting
// for the script, as a pool holds it), against a cold Run of the same
// trivial script, the bare host interpreter running it, and the bare host
// interpreter doing nothing (python3 -I -S -B -c pass), interleaved within
// each iteration. It reports the medians in ms, warm/cold, warm/pass, and
// the medians of the warm run's phases. Preparing is not timed: the warm
// run starts once the interpreter waits for its script, as in a pool that
// refilled between requests.
func BenchmarkPreparedAhead(b *testing.B) {
	e, tpl, bare, _ := newBench(b)
	ctx := context.Background()
	pass := func(b *testing.B) time.Duration {
		return timed(b, "python3 -c pass", exec.Command("/usr/bin/python3", "-I", "-S", "-B", "-c", "pass"))
	}
	job := isolate.Job{InvocationID: "bench", Script: []byte(benchScript)}

	var warm, cold, bareT, passT, start, run, destroy []time.Duration
	for b.Loop() {
		sb, err := e.rt.Prepare(ctx, tpl)
		if err != nil {
			b.Fatalf("prepare: %v", err)
		}
		waitBootstrapBlocked(b, e.runID)
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		o := sb.Exec(ctx, job)
		t1 := time.Now()
		err = sb.Destroy(ctx)
		warm = append(warm, time.Since(t0))
		destroy = append(destroy, time.Since(t1))
		if err != nil || o.Kind != isolate.KindOK {
			b.Fatalf("warm: outcome %s: %s (destroy: %v)", o.Kind, o.Detail, err)
		}
		start = append(start, o.Timings.Start)
		run = append(run, o.Timings.Run+o.Timings.Read)

		t0 = time.Now()
		o = e.rt.Run(ctx, isolate.Spec{Template: tpl, Job: job})
		cold = append(cold, time.Since(t0))
		if o.Kind != isolate.KindOK {
			b.Fatalf("cold: outcome %s: %s", o.Kind, o.Detail)
		}
		bareT = append(bareT, bare(b))
		passT = append(passT, pass(b))
	}
	report(b, "warm-ms", warm)
	report(b, "cold-ms", cold)
	report(b, "bare-ms", bareT)
	report(b, "pass-ms", passT)
	b.ReportMetric(isolatetest.Median(warm).Seconds()/isolatetest.Median(cold).Seconds(), "warm/cold")
	b.ReportMetric(isolatetest.Median(warm).Seconds()/isolatetest.Median(passT).Seconds(), "warm/pass")
	report(b, "warm-start-ms", start)
	report(b, "warm-run-ms", run)
	report(b, "warm-destroy-ms", destroy)
}

// newBench returns what the end-to-end benchmarks share: a runtime, the
// template over a seed repository, the bare host interpreter's variant
// over the same seed, and the seed.
func newBench(b *testing.B) (*testEnv, isolate.Template, func(*testing.B) time.Duration, string) {
	repo := seedRepo(b)
	e := newEnv(b)
	return e, e.template(b, repo), newBareVariant(b, repo), repo
}

// newBareVariant runs the script with the host interpreter, no sandbox.
func newBareVariant(b *testing.B, repo string) func(*testing.B) time.Duration {
	dir := b.TempDir()
	require.NoError(b, os.Symlink(repo, filepath.Join(dir, "repo")))
	script := filepath.Join(dir, "query-script.py")
	require.NoError(b, os.WriteFile(script, []byte(benchScript), 0o644))
	return func(b *testing.B) time.Duration {
		cmd := exec.Command("/usr/bin/python3", "-I", "-S", "-B", script)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin", "LANG=C.UTF-8"}
		return timed(b, "bare", cmd)
	}
}

// timed runs cmd and returns how long it took; a failure fails b as what.
func timed(b *testing.B, what string, cmd *exec.Cmd) time.Duration {
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v: %s", what, err, out)
	}
	return time.Since(t0)
}

// newBwrapVariant runs the script under bubblewrap with the same root, a
// fresh writable /query, the repo read-only and the script at the same path.
// bubblewrap sets up no cgroups and, here, no seccomp filter.
func newBwrapVariant(b *testing.B, repo string) func(*testing.B) time.Duration {
	bwrap, err := exec.LookPath("bwrap")
	require.NoError(b, err, "bubblewrap is needed for the side-by-side benchmark")
	dir := b.TempDir()
	awf := filepath.Join(dir, "awf")
	require.NoError(b, os.Mkdir(awf, 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(awf, "query-script.py"), []byte(benchScript), 0o644))
	query := filepath.Join(dir, "query")
	return func(b *testing.B) time.Duration {
		require.NoError(b, os.RemoveAll(query))
		require.NoError(b, os.Mkdir(query, 0o777))
		return timed(b, "bwrap", exec.Command(bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
			"--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--hostname", "sandbox",
			"--ro-bind", testRootFS, "/", "--proc", "/proc", "--dev", "/dev",
			"--size", "16777216", "--tmpfs", "/tmp", "--bind", query, "/query", "--ro-bind", repo, "/query/repo",
			"--ro-bind", awf, "/awf", "--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv", "LANG", "C.UTF-8",
			"--chdir", "/query", "/usr/bin/python3", "-I", "-S", "-B", isolate.ScriptPath))
	}
}

// benchScript and report are isolatetest.BenchScript and
// isolatetest.ReportMedian under the short names this package's benchmarks use.
const benchScript = isolatetest.BenchScript

func report(b *testing.B, unit string, ds []time.Duration) { isolatetest.ReportMedian(b, unit, ds) }
