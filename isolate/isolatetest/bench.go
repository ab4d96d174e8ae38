package isolatetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// BenchScript lists the repository and writes a JSON answer, relative to
// its working directory (/query in a sandbox), so that the same bytes run
// in every backend's benchmark and in direct's bare and bubblewrap
// variants: a difference between their timings is then the backend's.
const BenchScript = `import os, json
json.dump({"files": len(os.listdir("repo"))}, open("out", "w"))
`

// TreeWalkScript hashes every file of the working tree (not .git), in a
// stable order, and answers "true": the tree-walk workload of make bench
// (tests/bench) and of the backends' repository benchmarks.
const TreeWalkScript = `import os, hashlib
h = hashlib.sha256()
n = 0
for root, dirs, files in os.walk("repo"):
    dirs[:] = sorted(d for d in dirs if d != ".git")
    for name in sorted(files):
        with open(os.path.join(root, name), "rb") as f:
            h.update(f.read())
        n += 1
open("out", "w").write("true" if n > 0 and h.digest() else "false")
`

// TimedRun runs job on rt as one cold job (Run: prepare, exec, destroy)
// and returns its outcome and how long Run took. An outcome other than ok
// fails b, its message led by what.
func TimedRun(ctx context.Context, b testing.TB, what string, rt isolate.Runtime, tpl isolate.Template, job isolate.Job) (isolate.Outcome, time.Duration) {
	b.Helper()
	t0 := time.Now()
	o := rt.Run(ctx, isolate.Spec{Template: tpl, Job: job})
	d := time.Since(t0)
	if o.Kind != isolate.KindOK {
		b.Fatalf("%s: outcome %s: %s %s", what, o.Kind, o.Detail, o.Stderr)
	}
	return o, d
}

// Median returns the median of ds, or 0 for none. The benchmarks report
// medians, not means: one slow run on a loaded host moves a mean a long
// way.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// ReportMedian adds the median of ds, in milliseconds, as the benchmark
// metric unit; with no durations it adds none rather than a false 0.
func ReportMedian(b *testing.B, unit string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64(Median(ds))/float64(time.Millisecond), unit)
}

// SeedSizes are the repository sizes the backends' repository benchmarks
// run over: 10 and 10,000 files, and 100,000 with AWF_BENCH_LARGE=1.
func SeedSizes() []int {
	sizes := []int{10, 10_000}
	if os.Getenv("AWF_BENCH_LARGE") == "1" {
		sizes = append(sizes, 100_000)
	}
	return sizes
}

// BenchSeed writes a seed of n small files, 100 to a directory, read-only
// as staged seeds are.
func BenchSeed(b *testing.B, n int) string {
	seed := filepath.Join(b.TempDir(), "seed")
	for i := range n {
		d := filepath.Join(seed, fmt.Sprintf("d%04d", i/100))
		require.NoError(b, os.MkdirAll(d, 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.txt", i%100)), []byte(fmt.Sprintf("line %d\n", i)), 0o444))
	}
	return seed
}
