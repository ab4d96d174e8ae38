package timingcheck

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKSTest(t *testing.T) {
	seq := func(from, step float64, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = from + step*float64(i)
		}
		return out
	}
	cases := []struct {
		name   string
		a, b   []float64
		d      float64
		reject bool
	}{
		{"identical", seq(0, 1, 20), seq(0, 1, 20), 0, false},
		{"interleaved", seq(0, 2, 20), seq(1, 2, 20), 0.05, false},
		{"disjoint", seq(0, 1, 20), seq(100, 1, 20), 1, true},
		{"shifted by 9 of 20", seq(0, 1, 20), seq(9, 1, 20), 0.45, false},
		{"mostly shifted", seq(0, 1, 20), seq(14, 1, 20), 0.7, true},
		{"ties", []float64{1, 1, 1, 2}, []float64{1, 1, 2, 2}, 0.25, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ks := KSTest(tc.a, tc.b, 0.01)
			assert.InDelta(t, tc.d, ks.D, 1e-9)
			assert.Equal(t, tc.reject, ks.P < 0.01, "p %g", ks.P)
			assert.Equal(t, ks.D > ks.Critical, ks.P < 0.01, "the critical D and the p-value agree: %+v", ks)
		})
	}
	// 20 against 20 at 0.01: 1.628 / (sqrt(10) + 0.12 + 0.11/sqrt(10)).
	assert.InDelta(t, 1.628/(math.Sqrt(10)+0.12+0.11/math.Sqrt(10)), KSTest(seq(0, 1, 20), seq(0, 1, 20), 0.01).Critical, 1e-3)
}

func TestKolmogorovQ(t *testing.T) {
	// Table values of the Kolmogorov distribution's survival function.
	for _, c := range []struct{ lambda, q float64 }{{0.5, 0.9639}, {1.0, 0.2700}, {1.36, 0.0495}, {1.63, 0.0098}, {2.0, 0.00067}} {
		t.Run(fmt.Sprint(c.lambda), func(t *testing.T) {
			require.InDelta(t, c.q, kolmogorovQ(c.lambda), 5e-4)
		})
	}
}

// TestJudge checks the verdicts on synthetic samples: hidden, a client-side
// shift the buckets let through, bucket misses, no power, failed requests.
func TestJudge(t *testing.T) {
	const bucket = 1000
	mk := func(class string, n int, client func(i int) float64, elapsed int64, bucketMs int64, ok bool) []Sample {
		out := make([]Sample, n)
		for i := range out {
			out[i] = Sample{Class: class, ClientMs: client(i), ElapsedMs: elapsed + int64(i), BucketMs: bucketMs, OK: ok}
		}
		return out
	}
	jit := func(i int) float64 { return bucket + 0.1 + float64((i*7)%20)/100 }
	shift := func(i int) float64 { return jit(i) + 3 }
	cases := []struct {
		name    string
		samples []Sample
		pass    bool
		fail    string
	}{
		{"hidden", append(mk("fast", 20, jit, 200, bucket, true), mk("slow", 20, jit, 600, bucket, true)...), true, ""},
		{"shift leaks", append(mk("fast", 20, jit, 200, bucket, true), mk("slow", 20, shift, 600, bucket, true)...), false, "the buckets do not hide"},
		{"late wakes", append(mk("fast", 20, jit, 200, bucket, true), mk("slow", 20, jit, 600, 10000, true)...), false, "late wake 20"},
		{"overruns", append(mk("fast", 20, jit, 200, bucket, true), mk("slow", 20, jit, 1200, 10000, true)...), false, "overrun 20"},
		{"early", append(mk("fast", 20, jit, 50, 100, true), mk("slow", 20, jit, 600, bucket, true)...), false, "early 20"},
		{"no power", append(mk("fast", 20, jit, 200, bucket, true), mk("slow", 20, jit, 200, bucket, true)...), false, "no power"},
		{"errors", append(mk("fast", 20, jit, 200, bucket, false), mk("slow", 20, jit, 600, bucket, true)...), false, "did not answer ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{BucketMs: bucket, Alpha: 0.01, Samples: tc.samples}
			r.judge()
			assert.Equal(t, tc.pass, r.Pass, "%v", r.Failures)
			if tc.fail != "" {
				assert.Contains(t, fmt.Sprint(r.Failures), tc.fail)
			}
			assert.Contains(t, r.Text(), map[bool]string{true: "PASS", false: "FAIL"}[tc.pass])
		})
	}
}

func TestPlanClasses(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		lo, hi             time.Duration
		bucket, pad, sleep time.Duration
	}{
		// The direct runtime on this host: 1 s bucket, the fast class
		// lifted above 150 ms, the slow one midway to the bucket.
		{90 * ms, 280 * ms, time.Second, 60 * ms, 60*ms + (1000-280-60)/2*ms},
		{200 * ms, 280 * ms, time.Second, 0, 360 * ms},
		// A cheap run of 4 ms: the 10 ms bucket would leave no margin.
		{2 * ms, 4 * ms, 100 * ms, 13 * ms, 13*ms + (100-4-13)*ms/2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.lo, c.hi), func(t *testing.T) {
			p, err := planClasses(c.lo, c.hi)
			require.NoError(t, err)
			assert.Equal(t, c.bucket, p.bucket)
			assert.Equal(t, c.pad, p.fastPad)
			assert.Equal(t, c.sleep, p.slowSleep)
			assert.LessOrEqual(t, (c.hi+p.fastPad)*3/2, p.bucket, "the fast class keeps a third of headroom")
			assert.Less(t, c.hi+p.slowSleep, p.bucket)
		})
	}
	_, err := planClasses(time.Hour, time.Hour)
	require.Error(t, err)
}
