// Package timingcheck is the timing self-test of awf isolate verify
// --timing: it sends fast and slow scripts that fall in the same timing
// bucket through a real broker (the server, the runtime, the bucket wait and
// the audit, over the Unix socket, as an agent does) and asks whether the
// response times the client sees still tell the two apart.
//
// The buckets are the only thing between a script's running time and the
// agent, so this is the test of the claim that a script cannot signal
// through time within a bucket. It compares the two client-side
// distributions with a two-sample Kolmogorov–Smirnov test, counts the
// responses that left the intended bucket (a late wake re-resolves to the
// next one, a whole bucket of signal), and measures the host's wake-up
// jitter, which is what remains of the response time inside a bucket.
package timingcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// Defaults. N = 20 per class keeps a run on the direct runtime near 45 s
// (40 requests in the 1 s bucket plus calibration); the KS test then sees
// differences of D > 0.49 at alpha 0.01, which a sleep of hundreds of
// milliseconds exceeds (D = 1) unless the buckets hide it.
const (
	DefaultN     = 20
	DefaultAlpha = 0.01
	// calibrationRuns fast requests fix the bucket before the sample.
	calibrationRuns = 3
	// jitterWakes 1 ms sleeps measure the host's wake-up lateness.
	jitterWakes = 200
	repo        = "timing/check"
	schema      = `{"type":"const","value":1}`
	okBody      = `{"status":"ok","result":1}`
	fastScript  = "open('/query/out','w').write('1')\n"
)

// slowScript sleeps d inside the sandbox, then answers as the fast one does.
func slowScript(d time.Duration) string {
	return fmt.Sprintf("import time\ntime.sleep(%.3f)\nopen('/query/out','w').write('1')\n", d.Seconds())
}

// classPlan is what calibration decides: the bucket both classes must fall
// in, the sleep that keeps the fast class above the bucket below it, and the
// slow class's sleep.
type classPlan struct {
	bucket, fastPad, slowSleep time.Duration
}

// planClasses picks the bucket from the cheapest script's running times
// (lo to hi): the first that leaves it a third of headroom. The fast class
// sleeps enough to start half a lower bucket above the bucket below (a
// cheap run that lands there would be a miss of the check's own making);
// the slow class sleeps half of what the fast one leaves, so that both keep
// a wide margin and the difference is far above any jitter.
func planClasses(lo, hi time.Duration) (classPlan, error) {
	var p classPlan
	for {
		b, ok := broker.ResolveBucket(max(hi+p.fastPad, 0)*3/2 + 20*time.Millisecond)
		if !ok {
			return p, fmt.Errorf("timing check: the cheapest script takes up to %v, beyond every bucket", hi)
		}
		var lower time.Duration
		for _, x := range proto.TimingBuckets() {
			if x < b {
				lower = x
			}
		}
		pad := max(0, lower*3/2-lo)
		if pad == p.fastPad {
			p.bucket = b
			break
		}
		p.fastPad = pad
	}
	p.slowSleep = p.fastPad + (p.bucket-hi-p.fastPad)/2
	return p, nil
}

// Options configure one check.
type Options struct {
	// Runtime is opened and probed by the caller, and closed by it.
	Runtime isolate.Runtime
	// Template is the sandbox template (RunID, RootFS, Limits, Policy);
	// Repo is set to the check's own seed.
	Template isolate.Template
	// N is the number of requests per class (default DefaultN).
	N int
	// Alpha is the significance of both KS tests (default DefaultAlpha).
	Alpha float64
	// WorkDir holds the seed, the socket and the audit (a fresh temporary
	// directory when empty); it is removed at the end only when created here.
	WorkDir string
	// Progress, when set, is told each step.
	Progress func(string)
}

// Sample is one request as the client and the audit saw it.
type Sample struct {
	Class string `json:"class"` // fast or slow
	// ClientMs is the response time from connect to the last byte read.
	ClientMs float64 `json:"client_ms"`
	// ElapsedMs is the broker's measured processing time before the
	// bucket wait; BucketMs the bucket it answered in (0 for an overflow).
	ElapsedMs int64 `json:"elapsed_ms"`
	BucketMs  int64 `json:"bucket_ms"`
	OK        bool  `json:"ok"`
}

// Summary describes one class's client-side times above the bucket.
type Summary struct {
	N int `json:"n"`
	// Min, P50, P95 and Max are of ClientMs minus the bucket.
	MinMs float64 `json:"min_over_bucket_ms"`
	P50Ms float64 `json:"p50_over_bucket_ms"`
	P95Ms float64 `json:"p95_over_bucket_ms"`
	MaxMs float64 `json:"max_over_bucket_ms"`
	// ElapsedP50Ms is the median time inside the broker before the wait:
	// what the client would see without buckets.
	ElapsedP50Ms float64 `json:"elapsed_p50_ms"`
	// Misses are the responses outside the bucket, by cause: Early ran
	// shorter than the bucket below, Overrun ran longer than the bucket,
	// LateWake ran within it but the broker woke more than the tolerance
	// after the boundary and answered in the next bucket (host jitter).
	Misses   int `json:"misses"`
	Early    int `json:"misses_early"`
	Overrun  int `json:"misses_overrun"`
	LateWake int `json:"misses_late_wake"`
}

// Jitter is the lateness of jitterWakes 1 ms absolute sleeps on a
// prioritized thread, as the bucket wait sleeps.
type Jitter struct {
	Wakes int     `json:"wakes"`
	P50Us float64 `json:"p50_us"`
	P99Us float64 `json:"p99_us"`
	MaxUs float64 `json:"max_us"`
	// OverTolerance counts wakes later than the public tolerance.
	OverTolerance int `json:"over_tolerance"`
}

// Report is the outcome of one check.
type Report struct {
	Runtime     string  `json:"runtime"`
	N           int     `json:"n"`
	Alpha       float64 `json:"alpha"`
	BucketMs    int64   `json:"bucket_ms"`
	ToleranceMs int64   `json:"tolerance_ms"`
	FastPadMs   int64   `json:"fast_sleep_ms"`
	SlowSleepMs int64   `json:"slow_sleep_ms"`
	Fast        Summary `json:"fast"`
	Slow        Summary `json:"slow"`
	// Client compares the response times the client saw; Elapsed the
	// broker's processing times (it must reject, or the check has no power).
	Client   KS       `json:"ks_client"`
	Elapsed  KS       `json:"ks_elapsed"`
	MissRate float64  `json:"bucket_miss_rate"`
	Jitter   Jitter   `json:"host_jitter"`
	Seconds  float64  `json:"seconds"`
	Pass     bool     `json:"pass"`
	Failures []string `json:"failures,omitempty"`
	Samples  []Sample `json:"samples"`
}

// Run performs the check. An error means it could not run (the broker did
// not start, a request failed at the transport); a difference the buckets
// do not hide is a failing Report.
func Run(ctx context.Context, o Options) (*Report, error) {
	t0 := time.Now()
	if o.Runtime == nil {
		return nil, errors.New("timing check: no runtime")
	}
	if o.N <= 0 {
		o.N = DefaultN
	}
	if o.Alpha <= 0 || o.Alpha >= 1 {
		o.Alpha = DefaultAlpha
	}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	work := o.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "awf-timing-")
		if err != nil {
			return nil, fmt.Errorf("timing check: %w", err)
		}
		defer os.RemoveAll(d)
		work = d
	}
	seed := filepath.Join(work, "seed")
	if err := writeSeed(seed); err != nil {
		return nil, fmt.Errorf("timing check: seed: %w", err)
	}
	defer makeWritable(seed)

	tmpl := o.Template
	tmpl.Repo = ""
	if w, ok := o.Runtime.(isolate.Warmer); ok {
		t := tmpl
		t.Repo = seed
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := w.Warm(wctx, t)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("timing check: warm the seed: %w", err)
		}
	}
	auditDir := filepath.Join(work, "audit")
	audit, err := broker.OpenAudit(auditDir, "audit.jsonl")
	if err != nil {
		return nil, fmt.Errorf("timing check: audit: %w", err)
	}
	defer audit.Close()
	b, err := broker.New(broker.Options{
		Kind: broker.QueryKind{}, Runtime: o.Runtime, Template: tmpl,
		Seeds:          []broker.Seed{{Repo: repo, Dir: seed, Sensitivity: proto.SensitivityPublic}},
		MaxInvocations: 2*o.N + calibrationRuns + 1,
		Timeout:        tmpl.Limits.Wall,
		Audit:          audit,
	})
	if err != nil {
		return nil, fmt.Errorf("timing check: broker: %w", err)
	}
	sock := filepath.Join(work, "broker.sock")
	ln, err := broker.ListenUnix(sock, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("timing check: listen: %w", err)
	}
	srv := broker.NewServer(b, audit)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		<-served
	}()

	rep := &Report{Runtime: o.Runtime.Name(), N: o.N, Alpha: o.Alpha, ToleranceMs: proto.TimingToleranceMS}
	rep.Jitter = measureJitter(ctx)
	say("host jitter: p50 %.0f µs, p99 %.0f µs, max %.0f µs over %d wakes", rep.Jitter.P50Us, rep.Jitter.P99Us, rep.Jitter.MaxUs, rep.Jitter.Wakes)

	ask := func(class, script string) (Sample, error) {
		if err := ctx.Err(); err != nil {
			return Sample{}, err
		}
		req := client.BuildRequest(client.QueryHeaders(client.Args{Repo: repo, Schema: schema}), []byte(script))
		start := time.Now()
		body, err := client.Exchange(sock, req, start.Add(client.Deadline))
		el := time.Since(start)
		if err != nil {
			return Sample{}, fmt.Errorf("timing check: %s request: %w", class, err)
		}
		return Sample{Class: class, ClientMs: float64(el.Microseconds()) / 1000, OK: string(body) == okBody}, nil
	}
	var samples []Sample
	for i := 0; i < calibrationRuns; i++ {
		s, err := ask("calibration", fastScript)
		if err != nil {
			return nil, err
		}
		samples = append(samples, s)
	}
	recs, err := readAudit(filepath.Join(auditDir, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(recs) != calibrationRuns {
		return nil, fmt.Errorf("timing check: %d audit records for %d calibration requests", len(recs), calibrationRuns)
	}
	fastMin, fastMax := int64(math.MaxInt64), int64(0)
	for i, r := range recs {
		if !samples[i].OK || r.ElapsedMs == nil {
			return nil, fmt.Errorf("timing check: the fast script failed in calibration: %s %s", r.Reason, r.Detail)
		}
		fastMin, fastMax = min(fastMin, *r.ElapsedMs), max(fastMax, *r.ElapsedMs)
	}
	plan, err := planClasses(time.Duration(fastMin)*time.Millisecond, time.Duration(fastMax)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	rep.BucketMs, rep.FastPadMs, rep.SlowSleepMs = plan.bucket.Milliseconds(), plan.fastPad.Milliseconds(), plan.slowSleep.Milliseconds()
	say("calibration: the cheapest script takes %d to %d ms; bucket %d ms; the fast script sleeps %d ms, the slow one %d ms",
		fastMin, fastMax, rep.BucketMs, rep.FastPadMs, rep.SlowSleepMs)

	// Interleave the classes in a random order, so that drift in the host's
	// load falls on both alike.
	order := make([]bool, 2*o.N)
	for i := o.N; i < 2*o.N; i++ {
		order[i] = true
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	fast, slow := fastScript, slowScript(plan.slowSleep)
	if plan.fastPad > 0 {
		fast = slowScript(plan.fastPad)
	}
	for i, isSlow := range order {
		class, script := "fast", fast
		if isSlow {
			class, script = "slow", slow
		}
		s, err := ask(class, script)
		if err != nil {
			return nil, err
		}
		samples = append(samples, s)
		if (i+1)%10 == 0 {
			say("%d of %d requests", i+1, len(order))
		}
	}
	recs, err = readAudit(filepath.Join(auditDir, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(recs) != len(samples) {
		return nil, fmt.Errorf("timing check: %d audit records for %d requests", len(recs), len(samples))
	}
	for i, r := range recs {
		if r.ElapsedMs != nil {
			samples[i].ElapsedMs = *r.ElapsedMs
		}
		if r.BucketMs != nil {
			samples[i].BucketMs = *r.BucketMs
		}
		if r.Kind != "invocation" {
			samples[i].OK = false
		}
	}
	rep.Samples = samples[calibrationRuns:]
	rep.judge()
	rep.Seconds = time.Since(t0).Seconds()
	return rep, nil
}

// judge computes the statistics and the verdict.
func (r *Report) judge() {
	var fc, sc, fe, se []float64
	var fs, ss []Sample
	misses, failed := 0, 0
	for _, s := range r.Samples {
		if !s.OK {
			failed++
		}
		miss := s.BucketMs != r.BucketMs
		if miss {
			misses++
		}
		if s.Class == "fast" {
			fc, fe, fs = append(fc, s.ClientMs), append(fe, float64(s.ElapsedMs)), append(fs, s)
		} else {
			sc, se, ss = append(sc, s.ClientMs), append(se, float64(s.ElapsedMs)), append(ss, s)
		}
	}
	r.Fast, r.Slow = summarize(fs, r.BucketMs), summarize(ss, r.BucketMs)
	r.Client = KSTest(fc, sc, r.Alpha)
	r.Elapsed = KSTest(fe, se, r.Alpha)
	r.MissRate = float64(misses) / float64(max(1, len(r.Samples)))
	if failed > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d of %d requests did not answer ok: the check measures nothing else", failed, len(r.Samples)))
	}
	if misses > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d of %d responses left the %d ms bucket (fast %d, slow %d; early %d, overrun %d, late wake %d): each is a whole bucket the client sees",
			misses, len(r.Samples), r.BucketMs, r.Fast.Misses, r.Slow.Misses,
			r.Fast.Early+r.Slow.Early, r.Fast.Overrun+r.Slow.Overrun, r.Fast.LateWake+r.Slow.LateWake))
	}
	if r.Elapsed.P >= r.Alpha {
		r.Failures = append(r.Failures, fmt.Sprintf("inside the broker the slow script was not told from the fast one (KS D %.2f, p %.3g): the check has no power", r.Elapsed.D, r.Elapsed.P))
	}
	if r.Client.P < r.Alpha {
		r.Failures = append(r.Failures, fmt.Sprintf("the client tells the slow script from the fast one (KS D %.2f > %.2f, p %.3g < %g): the buckets do not hide the difference",
			r.Client.D, r.Client.Critical, r.Client.P, r.Alpha))
	}
	r.Pass = len(r.Failures) == 0
}

func summarize(ss []Sample, bucketMs int64) Summary {
	var over, el []float64
	var sum Summary
	for _, s := range ss {
		over = append(over, s.ClientMs-float64(bucketMs))
		el = append(el, float64(s.ElapsedMs))
		switch {
		case s.BucketMs == bucketMs:
			continue
		case s.BucketMs != 0 && s.BucketMs < bucketMs:
			sum.Early++
		case s.ElapsedMs > bucketMs:
			sum.Overrun++
		default:
			sum.LateWake++
		}
		sum.Misses++
	}
	sort.Float64s(over)
	sort.Float64s(el)
	sum.N, sum.MinMs, sum.P50Ms, sum.P95Ms, sum.MaxMs = len(ss), quantile(over, 0), quantile(over, 0.5), quantile(over, 0.95), quantile(over, 1)
	sum.ElapsedP50Ms = quantile(el, 0.5)
	return sum
}

// quantile of sorted xs by the nearest rank.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// measureJitter sleeps 1 ms to an absolute deadline jitterWakes times on a
// prioritized thread, as WaitForBucket does, and records how late it woke.
func measureJitter(ctx context.Context) Jitter {
	var late []float64
	broker.Prioritized(func() {
		for i := 0; i < jitterWakes && ctx.Err() == nil; i++ {
			var now unix.Timespec
			if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
				return
			}
			want := now.Nano() + int64(time.Millisecond)
			ts := unix.NsecToTimespec(want)
			for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
			}
			if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
				return
			}
			late = append(late, float64(now.Nano()-want)/1000)
		}
	})
	sort.Float64s(late)
	j := Jitter{Wakes: len(late), P50Us: quantile(late, 0.5), P99Us: quantile(late, 0.99), MaxUs: quantile(late, 1)}
	for _, l := range late {
		if l > float64(proto.TimingToleranceMS*1000) {
			j.OverTolerance++
		}
	}
	return j
}

// readAudit returns the invocation and failure records, in order.
func readAudit(path string) ([]broker.Record, error) {
	recs, err := broker.ReadAudit(path)
	if err != nil {
		return nil, fmt.Errorf("timing check: %w", err)
	}
	out := recs[:0]
	for _, r := range recs {
		if r.Kind == "invocation" || r.Kind == "failure" {
			out = append(out, r)
		}
	}
	return out, nil
}

// writeSeed makes a one-file read-only seed the way staging leaves one:
// root-owned, files 0444, directories 0555.
func writeSeed(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("timing self-test seed\n"), 0o444); err != nil {
		return err
	}
	return os.Chmod(dir, 0o555)
}

// makeWritable undoes writeSeed's modes so that the directory can be removed.
func makeWritable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}

// Text renders the report for a terminal.
func (r *Report) Text() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s timing/buckets (%s): %d fast and %d slow requests through the broker, bucket %d ms, fast sleeps %d ms, slow %d ms, %.0f s\n",
		verdict, r.Runtime, r.Fast.N, r.Slow.N, r.BucketMs, r.FastPadMs, r.SlowSleepMs, r.Seconds)
	fmt.Fprintf(&b, "  inside the broker: fast p50 %.0f ms, slow p50 %.0f ms; KS D %.2f, p %.3g (must reject)\n",
		r.Fast.ElapsedP50Ms, r.Slow.ElapsedP50Ms, r.Elapsed.D, r.Elapsed.P)
	fmt.Fprintf(&b, "  at the client, above the bucket: fast min/p50/p95/max %.2f/%.2f/%.2f/%.2f ms, slow %.2f/%.2f/%.2f/%.2f ms\n",
		r.Fast.MinMs, r.Fast.P50Ms, r.Fast.P95Ms, r.Fast.MaxMs, r.Slow.MinMs, r.Slow.P50Ms, r.Slow.P95Ms, r.Slow.MaxMs)
	fmt.Fprintf(&b, "  KS at the client: D %.2f, p %.3g (rejects above D %.2f at alpha %g); bucket misses %d of %d (%.1f%%)\n",
		r.Client.D, r.Client.P, r.Client.Critical, r.Alpha, r.Fast.Misses+r.Slow.Misses, r.Fast.N+r.Slow.N, 100*r.MissRate)
	fmt.Fprintf(&b, "  host jitter (1 ms sleeps on a prioritized thread): p50 %.0f µs, p99 %.0f µs, max %.0f µs, %d of %d beyond the %d ms tolerance\n",
		r.Jitter.P50Us, r.Jitter.P99Us, r.Jitter.MaxUs, r.Jitter.OverTolerance, r.Jitter.Wakes, r.ToleranceMs)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAIL: %s\n", f)
	}
	return b.String()
}
