package isolatetest

import (
	"slices"
	"testing"
	"time"
)

// BenchScript lists the repository and writes a JSON answer, relative to
// its working directory (/query in a sandbox), so that the same bytes run
// in every backend's benchmark and in direct's bare and bubblewrap
// variants: a difference between their timings is then the backend's.
const BenchScript = `import os, json
json.dump({"files": len(os.listdir("repo"))}, open("out", "w"))
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
