package isolatetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
