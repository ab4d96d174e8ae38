// Package bench is the side-by-side benchmark suite that "make bench" runs:
// the host floor, bubblewrap, every awf runtime cold and warm, the broker end
// to end, and the reference's copy-then-docker-run approach, interleaved in
// one run over repositories of three sizes and three workloads. The suite
// itself runs only when AWF_BENCH_SUITE=1 (see suite_test.go); this file is
// its report: statistics, the targets and the generated markdown
// and JSON, which a plain "go test" checks against a fixture.
package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/proto"
)

// Stats summarises one row's samples in milliseconds.
type Stats struct {
	N        int     `json:"n"`
	MedianMS float64 `json:"medianMs"`
	P95MS    float64 `json:"p95Ms"`
	MinMS    float64 `json:"minMs"`
	MaxMS    float64 `json:"maxMs"`
}

// Summarise returns the statistics of ds (nearest-rank p95).
func Summarise(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
	rank := int(math.Ceil(0.95*float64(len(s)))) - 1
	return Stats{
		N:        len(s),
		MedianMS: ms(median(s)),
		P95MS:    ms(s[max(rank, 0)]),
		MinMS:    ms(s[0]),
		MaxMS:    ms(s[len(s)-1]),
	}
}

// median of a sorted slice; the mean of the two middle values for an even n.
func median(s []time.Duration) time.Duration {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// BucketName names the timing bucket that processing time d falls in, as
// the broker resolves it (broker.ResolveBucket), or "overflow".
func BucketName(d time.Duration) string {
	b, ok := broker.ResolveBucket(d)
	if !ok {
		return "overflow"
	}
	return fmtBucket(b)
}

func fmtBucket(b time.Duration) string {
	if b >= time.Second {
		return fmt.Sprintf("%d s", b/time.Second)
	}
	return fmt.Sprintf("%d ms", b/time.Millisecond)
}

// Buckets counts the buckets of ds by name.
func Buckets(ds []time.Duration) map[string]int {
	m := map[string]int{}
	for _, d := range ds {
		m[BucketName(d)]++
	}
	return m
}

// Row describes one variant of the suite.
type Row struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	// Processing says what the row's processing time is.
	Processing string `json:"processing"`
}

// Cell is one row measured on one repository with one workload.
type Cell struct {
	Row      string `json:"row"`
	Repo     string `json:"repo"`
	Workload string `json:"workload"`
	// Blocked, when set, says why the row could not run; nothing else is set.
	Blocked    string         `json:"blocked,omitempty"`
	Processing Stats          `json:"processing"`
	Wall       *Stats         `json:"wall,omitempty"`
	Buckets    map[string]int `json:"buckets,omitempty"`
	// VsFloor is the ratio of the median processing time to the host
	// floor's (the same script with no sandbox) in the same cell.
	VsFloor float64 `json:"vsFloor,omitempty"`
	// VsPass is the ratio to bare "python3 -c pass" in the same cell.
	VsPass float64 `json:"vsPythonPass,omitempty"`
}

// Broker is what was measured through the product's broker.
type Broker struct {
	Blocked string `json:"blocked,omitempty"`
	// Config says how the broker ran (runtime, seeds, pool).
	Config string `json:"config"`
	// RSS of the broker process after start-up and at the end, in MiB,
	// and its peak (VmHWM).
	RSSReadyMiB float64 `json:"rssReadyMiB"`
	RSSEndMiB   float64 `json:"rssEndMiB"`
	RSSPeakMiB  float64 `json:"rssPeakMiB"`
	// Processing is the broker's own timing (audit elapsedMs), Wall the
	// bounded-query process's wall time at the agent.
	Processing Stats `json:"processing"`
	Wall       Stats `json:"wall"`
	// WallBackToBack is the wall time of queries asked BackToBackMS
	// after the previous answer (Wall: ThinkMS after it); a query that
	// arrives during the pool's refill waits for the refill's bucket.
	WallBackToBack Stats          `json:"wallBackToBack"`
	ThinkMS        int64          `json:"thinkMs"`
	BackToBackMS   int64          `json:"backToBackMs"`
	Buckets        map[string]int `json:"buckets,omitempty"`
	Repo           string         `json:"repo"`
	Workload       string         `json:"workload"`
	// The pass without a pool: every query builds its sandbox cold, with
	// the awf binary as the sandbox's init. ColdBlocked says why it did
	// not run; WallCold is at the agent, BackToBackMS after each answer.
	ColdConfig     string         `json:"coldConfig,omitempty"`
	ColdBlocked    string         `json:"coldBlocked,omitempty"`
	ProcessingCold Stats          `json:"processingCold"`
	WallCold       Stats          `json:"wallCold"`
	BucketsCold    map[string]int `json:"bucketsCold,omitempty"`
}

// Startup is the bounded-query client's start-up, next to /bin/true and
// to a Go program that only prints the same line (the Go runtime's own
// start-up, which no Go client can go below).
type Startup struct {
	Blocked  string `json:"blocked,omitempty"`
	Client   Stats  `json:"client"`
	BinTrue  Stats  `json:"binTrue"`
	GoFloor  Stats  `json:"goFloor"`
	Argument string `json:"argument"`
}

// Target is one of the targets, checked in the run (a report
// line, never an assertion).
type Target struct {
	Name   string `json:"name"`
	Status string `json:"status"` // PASS, MISS or N/A
	Detail string `json:"detail"`
}

// Report is the whole run.
type Report struct {
	Date      string   `json:"date"`
	Host      string   `json:"host"`
	Quick     bool     `json:"quick"`
	LoadStart string   `json:"loadStart"`
	LoadEnd   string   `json:"loadEnd"`
	Minutes   float64  `json:"minutes"`
	Repos     []string `json:"repos"`
	Workloads []string `json:"workloads"`
	Rows      []Row    `json:"rows"`
	Cells     []Cell   `json:"cells"`
	Broker    Broker   `json:"broker"`
	Startup   Startup  `json:"startup"`
	// Scaling holds the size targets' rows measured on the smallest and
	// the largest repository alternately; a report without it (an older
	// or quick run) reads those targets from the cells.
	Scaling []Scaling `json:"scaling,omitempty"`
	Notes   []string  `json:"notes,omitempty"`
	Targets []Target  `json:"targets"`
	// Comparisons are ratios that are not the targets but say
	// where a missed one's time goes (CheckTargets sets them).
	Comparisons []Target `json:"comparisons,omitempty"`
}

// Scaling is one row's trivial workload on the 10-file and the 100k-file
// repository, sampled alternately in the same rounds. The cells measure
// one repository after another, minutes apart, so a load that drifts
// over the run moves their ratio; here it hits both sizes alike.
type Scaling struct {
	Row     string `json:"row"`
	Blocked string `json:"blocked,omitempty"`
	Small   Stats  `json:"small"`
	Large   Stats  `json:"large"`
}

// ScalingOf returns row's interleaved size measurement, or nil.
func (r *Report) ScalingOf(row string) *Scaling {
	for i := range r.Scaling {
		if sc := &r.Scaling[i]; sc.Row == row && sc.Blocked == "" && sc.Small.N > 0 && sc.Large.N > 0 {
			return sc
		}
	}
	return nil
}

// medianRatio is a's median over b's, or 0 when b has none.
func medianRatio(a, b Stats) float64 {
	if b.MedianMS <= 0 {
		return 0
	}
	return a.MedianMS / b.MedianMS
}

// Cell returns the cell of row, repo and workload, or nil.
func (r *Report) Cell(row, repo, workload string) *Cell {
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Row == row && c.Repo == repo && c.Workload == workload {
			return c
		}
	}
	return nil
}

// Ratios fills every cell's VsFloor and VsPass from the same cell's floor
// rows.
func (r *Report) Ratios() {
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Blocked != "" || c.Processing.N == 0 {
			continue
		}
		if f := r.Cell(RowHost, c.Repo, c.Workload); f != nil && f.Processing.MedianMS > 0 {
			c.VsFloor = round2(c.Processing.MedianMS / f.Processing.MedianMS)
		}
		if p := r.Cell(RowPass, c.Repo, c.Workload); p != nil && p.Processing.MedianMS > 0 {
			c.VsPass = round2(c.Processing.MedianMS / p.Processing.MedianMS)
		}
	}
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// The row ids the targets name.
const (
	RowHost  = "host"
	RowPass  = "python-pass"
	RowBwrap = "bwrap"
	// RowBwrapBootstrap is bubblewrap running awf's interpreter bootstrap
	// (its preloaded imports) with the script on stdin, as a cold direct
	// sandbox runs it: the ratio to it is the sandbox's own cost.
	RowBwrapBootstrap = "bwrap-bootstrap"
	RowDirectCold     = "direct-cold"
	RowDirectWarm     = "direct-warm"
	// RowDirectColdFDM is direct-cold with the host's cgroup2 mounted
	// favordynmods (tests/bench/dynmods_test.go).
	RowDirectColdFDM = "direct-cold-fdm"
	RowGvisorCold    = "gvisor-cold"
	RowGvisorWarm    = "gvisor-warm"
	RowDocker        = "docker"
	RowReference     = "reference"
	RepoSmall        = "10"
	RepoMid          = "10k"
	RepoLarge        = "100k"
	WorkTrivial      = "trivial"
	WorkGitLog       = "gitlog"
	WorkTreeWalk     = "treewalk"
	targetRepo       = RepoMid
	targetWorkload   = WorkTrivial
)

// CheckTargets sets r.Targets from the targets.
func (r *Report) CheckTargets() {
	r.Targets = nil
	add := func(name string, ok, known bool, format string, a ...any) {
		st := "N/A"
		if known {
			st = "MISS"
			if ok {
				st = "PASS"
			}
		}
		r.Targets = append(r.Targets, Target{Name: name, Status: st, Detail: fmt.Sprintf(format, a...)})
	}
	get := func(row, repo string) (Stats, bool) {
		c := r.Cell(row, repo, targetWorkload)
		if c == nil || c.Blocked != "" || c.Processing.N == 0 {
			return Stats{}, false
		}
		return c.Processing, true
	}
	warm, okW := get(RowDirectWarm, targetRepo)
	add("direct warm, trivial boolean, 10k files: median ≤ 8 ms, p95 ≤ 10 ms", okW && warm.MedianMS <= 8 && warm.P95MS <= 10, okW,
		"median %.2f ms, p95 %.2f ms (n=%d)", warm.MedianMS, warm.P95MS, warm.N)
	pass, okP := get(RowPass, targetRepo)
	add("direct warm below bare `python3 -c pass`, same run", okW && okP && warm.MedianMS < pass.MedianMS, okW && okP,
		"warm %.2f ms, python3 -c pass %.2f ms", warm.MedianMS, pass.MedianMS)
	gw, okG := get(RowGvisorWarm, targetRepo)
	add("gvisor warm: median ≤ 80 ms (100 ms bucket)", okG && gw.MedianMS <= 80, okG, "median %.2f ms, p95 %.2f ms (n=%d)", gw.MedianMS, gw.P95MS, gw.N)
	cold, okC := get(RowDirectCold, targetRepo)
	bw, okB := get(RowBwrap, targetRepo)
	ratio := 0.0
	if okC && okB && bw.MedianMS > 0 {
		ratio = cold.MedianMS / bw.MedianMS
	}
	add("direct cold ≤ 1.5× bubblewrap, same run", okC && okB && ratio <= 1.5, okC && okB,
		"direct cold %.2f ms, bubblewrap %.2f ms: %.2f×", cold.MedianMS, bw.MedianMS, ratio)
	fdm, okF := get(RowDirectColdFDM, targetRepo)
	ratio = 0
	if okF && okB && bw.MedianMS > 0 {
		ratio = fdm.MedianMS / bw.MedianMS
	}
	r.Comparisons = nil
	if bb, ok := get(RowBwrapBootstrap, targetRepo); okC && ok && bb.MedianMS > 0 {
		st := "MISS"
		if cold.MedianMS/bb.MedianMS <= 1.5 {
			st = "PASS"
		}
		r.Comparisons = append(r.Comparisons, Target{
			Name:   "direct cold ≤ 1.5× bubblewrap running the same bootstrap (the sandbox's own cost, without the preloaded imports' share)",
			Status: st,
			Detail: fmt.Sprintf("direct cold %.2f ms, bubblewrap with the bootstrap %.2f ms: %.2f×", cold.MedianMS, bb.MedianMS, cold.MedianMS/bb.MedianMS),
		})
		if okB && bw.MedianMS > 0 {
			r.Comparisons = append(r.Comparisons, Target{
				Name:   "the bootstrap's share: bubblewrap with the bootstrap against bubblewrap with bare `python3`",
				Status: "INFO",
				Detail: fmt.Sprintf("%.2f ms against %.2f ms: %.2f×, +%.2f ms", bb.MedianMS, bw.MedianMS, bb.MedianMS/bw.MedianMS, bb.MedianMS-bw.MedianMS),
			})
		}
	}
	add("direct cold with the host's cgroup2 `favordynmods` ≤ 1.5× bubblewrap, same run", okF && okB && ratio <= 1.5, okF && okB,
		"direct cold %.2f ms, bubblewrap %.2f ms: %.2f×", fdm.MedianMS, bw.MedianMS, ratio)
	for _, row := range []string{RowDirectWarm, RowDirectCold} {
		small, ok1 := get(row, RepoSmall)
		large, ok2 := get(row, RepoLarge)
		how := ""
		if sc := r.ScalingOf(row); sc != nil {
			small, large, ok1, ok2 = sc.Small, sc.Large, true, true
			how = fmt.Sprintf(" (interleaved, n=%d and %d)", sc.Small.N, sc.Large.N)
		}
		ratio := 0.0
		if ok1 && ok2 {
			ratio = medianRatio(large, small)
		}
		add(fmt.Sprintf("%s: 100k-file repository within 1.2× of the 10-file median", row), ok1 && ok2 && ratio <= 1.2, ok1 && ok2,
			"100k %.2f ms, 10 files %.2f ms: %.2f×%s", large.MedianMS, small.MedianMS, ratio, how)
	}
	ref, okR := get(RowReference, targetRepo)
	ratio = 0
	if okW && okR && warm.MedianMS > 0 {
		ratio = ref.MedianMS / warm.MedianMS
	}
	add("≥ 20× lower median than the reference's approach (direct warm), same run", okW && okR && ratio >= 20, okW && okR,
		"reference %.2f ms, direct warm %.2f ms: %.1f×", ref.MedianMS, warm.MedianMS, ratio)
	b := r.Broker
	okRSS := b.Blocked == "" && b.RSSPeakMiB > 0
	add("broker RSS < 50 MB with 10 seeds ("+b.Config+")", okRSS && b.RSSPeakMiB*1.048576 < 50, okRSS,
		"ready %.1f MiB, end %.1f MiB, peak %.1f MiB", b.RSSReadyMiB, b.RSSEndMiB, b.RSSPeakMiB)
	s := r.Startup
	okS := s.Blocked == "" && s.Client.N > 0
	floor := ""
	if s.GoFloor.N > 0 {
		floor = fmt.Sprintf(", a Go program that only prints %.2f ms", s.GoFloor.MedianMS)
	}
	add("`bounded-query` start-up < 5 ms", okS && s.Client.MedianMS < 5, okS,
		"median %.2f ms, p95 %.2f ms (/bin/true %.2f ms%s)", s.Client.MedianMS, s.Client.P95MS, s.BinTrue.MedianMS, floor)
	if okS && s.GoFloor.N > 0 && s.GoFloor.MedianMS > 0 {
		r.Comparisons = append(r.Comparisons, Target{
			Name:   "`bounded-query` start-up against the Go runtime's own: a Go program that only prints the same line, same run",
			Status: "INFO",
			Detail: fmt.Sprintf("%.2f ms against %.2f ms: %.2f×, +%.2f ms", s.Client.MedianMS, s.GoFloor.MedianMS, s.Client.MedianMS/s.GoFloor.MedianMS, s.Client.MedianMS-s.GoFloor.MedianMS),
		})
	}
}

// The markers around the generated block of docs/PERFORMANCE.md.
const (
	BeginMarker = "<!-- BEGIN make bench: generated by tests/bench, do not edit by hand -->"
	EndMarker   = "<!-- END make bench -->"
)

// Markdown renders the generated block, markers included.
func (r *Report) Markdown() string {
	var w bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&w, format, a...) }
	p("%s\n## Side by side (`make bench`)\n\n", BeginMarker)
	mode := "full run"
	if r.Quick {
		mode = "quick run (`BENCH_QUICK=1`; too few samples to quote)"
	}
	p("Generated by `make bench` (tests/bench) on %s, %s, %s in %.1f min. Load average at start %s, at end %s.\n",
		r.Date, r.Host, mode, r.Minutes, r.LoadStart, r.LoadEnd)
	p("Every row of a table was measured in the same run, interleaved round by round within each repository and workload, so that load hits all rows alike: trust the ratios more than the milliseconds. The numbers are also in `docs/performance.json`.\n\n")
	p("### Targets (issue 19)\n\n| target | status | measured |\n|---|---|---|\n")
	for _, t := range r.Targets {
		p("| %s | **%s** | %s |\n", t.Name, t.Status, t.Detail)
	}
	if len(r.Comparisons) > 0 {
		p("\nNot targets: where the misses lie, same run.\n\n| comparison | status | measured |\n|---|---|---|\n")
		for _, t := range r.Comparisons {
			p("| %s | **%s** | %s |\n", t.Name, t.Status, t.Detail)
		}
	}
	p("\n### Rows\n\n| row | what runs | processing time is |\n|---|---|---|\n")
	for _, row := range r.Rows {
		p("| `%s` | %s | %s |\n", row.ID, row.Label, row.Processing)
	}
	names := map[string]string{
		WorkTrivial:  "trivial boolean (`/query/out` ← `true`)",
		WorkGitLog:   "`git log` count (commits reachable from HEAD, read from `.git` in Python: the rootfs has no git binary)",
		WorkTreeWalk: "tree walk with hashing (sha256 of every file outside `.git`)",
	}
	for _, wl := range r.Workloads {
		p("\n### Workload: %s\n\nEach cell: median / p95 processing in ms (n), the buckets observed, and the ratio of medians to the host floor.\n\n", names[wl])
		p("| row |")
		for _, repo := range r.Repos {
			p(" %s files |", repo)
		}
		p("\n|---|")
		for range r.Repos {
			p("---|")
		}
		p("\n")
		for _, row := range r.Rows {
			p("| `%s` |", row.ID)
			for _, repo := range r.Repos {
				c := r.Cell(row.ID, repo, wl)
				p(" %s |", cellText(c))
			}
			p("\n")
		}
	}
	if len(r.Scaling) > 0 {
		p("\n### Size: the 10-file against the 100k-file repository, interleaved\n\n")
		p("The trivial workload, each round one sample on each repository (the order alternating), so that a load that drifts over the run hits both alike; the size targets read these. Median / p95 processing in ms (n).\n\n")
		p("| row | 10 files | 100k files | 100k / 10 |\n|---|---|---|---|\n")
		for _, sc := range r.Scaling {
			if sc.Blocked != "" {
				p("| `%s` | %s | | |\n", sc.Row, sc.Blocked)
				continue
			}
			p("| `%s` | %s / %s (%d) | %s / %s (%d) | %.2f× |\n", sc.Row, fmtMS(sc.Small.MedianMS), fmtMS(sc.Small.P95MS), sc.Small.N, fmtMS(sc.Large.MedianMS), fmtMS(sc.Large.P95MS), sc.Large.N, medianRatio(sc.Large, sc.Small))
		}
	}
	b := r.Broker
	p("\n### Through the broker\n\n")
	if b.Blocked != "" {
		p("Not measured: %s\n", b.Blocked)
	} else {
		p("`awf broker` in the foreground (%s); the agent user runs `bounded-query` against its socket, %s workload on the %s-file repository.\n\n", b.Config, b.Workload, b.Repo)
		p("| what | median | p95 | n |\n|---|---|---|---|\n")
		p("| processing (the broker's audit `elapsedMs`, whole ms), every query | %.0f ms | %.0f ms | %d |\n", b.Processing.MedianMS, b.Processing.P95MS, b.Processing.N)
		p("| wall at the agent (the `bounded-query` process), %d ms after the previous answer | %.1f ms | %.1f ms | %d |\n", b.ThinkMS, b.Wall.MedianMS, b.Wall.P95MS, b.Wall.N)
		if b.WallBackToBack.N > 0 {
			p("| wall at the agent, %d ms after the previous answer (it can queue behind the pool's refill, which holds the lane until its own bucket) | %.1f ms | %.1f ms | %d |\n", b.BackToBackMS, b.WallBackToBack.MedianMS, b.WallBackToBack.P95MS, b.WallBackToBack.N)
		}
		p("\nBuckets observed: %s. Broker process RSS: %.1f MiB when ready, %.1f MiB at the end, peak (VmHWM) %.1f MiB.\n", bucketText(b.Buckets), b.RSSReadyMiB, b.RSSEndMiB, b.RSSPeakMiB)
		switch {
		case b.ColdBlocked != "":
			p("\nWithout a pool: not measured: %s\n", b.ColdBlocked)
		case b.ProcessingCold.N > 0:
			p("\nWithout a pool (%s): every query builds its sandbox cold, and each sandbox's init is the awf binary itself, with all of awf's initializers (the `direct-cold` row starts the bench's test binary instead). Queries %d ms after the previous answer.\n\n", b.ColdConfig, b.BackToBackMS)
			p("| what | median | p95 | n |\n|---|---|---|---|\n")
			p("| processing (the broker's audit `elapsedMs`, whole ms), every query | %.0f ms | %.0f ms | %d |\n", b.ProcessingCold.MedianMS, b.ProcessingCold.P95MS, b.ProcessingCold.N)
			p("| wall at the agent (the `bounded-query` process) | %.1f ms | %.1f ms | %d |\n", b.WallCold.MedianMS, b.WallCold.P95MS, b.WallCold.N)
			p("\nBuckets observed: %s.\n", bucketText(b.BucketsCold))
		}
	}
	s := r.Startup
	p("\n### `bounded-query` start-up\n\n")
	if s.Blocked != "" {
		p("Not measured: %s\n", s.Blocked)
	} else {
		p("The client run to a local refusal (%s), no broker contacted: median %.2f ms, p95 %.2f ms (n=%d); ", s.Argument, s.Client.MedianMS, s.Client.P95MS, s.Client.N)
		if s.GoFloor.N > 0 {
			p("in the same run, interleaved, `/bin/true` %.2f ms and a Go program that only prints the same line (`tests/bench/gofloor`, the Go runtime's own start-up) %.2f ms.\n", s.BinTrue.MedianMS, s.GoFloor.MedianMS)
		} else {
			p("`/bin/true` in the same run %.2f ms.\n", s.BinTrue.MedianMS)
		}
	}
	if len(r.Notes) > 0 {
		p("\n### Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	p("%s\n", EndMarker)
	return w.String()
}

func cellText(c *Cell) string {
	switch {
	case c == nil:
		return "—"
	case c.Blocked != "":
		return "not run: " + strings.ReplaceAll(c.Blocked, "|", "/")
	}
	s := fmt.Sprintf("%s / %s (%d), %s", fmtMS(c.Processing.MedianMS), fmtMS(c.Processing.P95MS), c.Processing.N, bucketText(c.Buckets))
	if c.VsFloor > 0 && c.Row != RowHost {
		s += fmt.Sprintf(", %.2f×", c.VsFloor)
	}
	return s
}

func fmtMS(f float64) string {
	switch {
	case f >= 1000:
		return fmt.Sprintf("%.0f", f)
	case f >= 100:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.2f", f)
}

// bucketText lists buckets in ascending order: "100 ms ×18, 1 s ×2".
func bucketText(m map[string]int) string {
	if len(m) == 0 {
		return "no buckets"
	}
	var parts []string
	for _, b := range append(proto.TimingBuckets(), -1) {
		name := "overflow"
		if b >= 0 {
			name = fmtBucket(b)
		}
		if n := m[name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", name, n))
		}
	}
	return strings.Join(parts, ", ")
}

// JSON renders the report as indented JSON with a final newline.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ReplaceBlock returns doc with its generated block replaced by block. A
// document without the markers gets the block before its first "## "
// section (after the title and its introduction); an unmatched marker is
// an error, so a hand edit is never silently overwritten.
func ReplaceBlock(doc, block string) (string, error) {
	if !strings.HasSuffix(block, "\n") {
		block += "\n"
	}
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	switch {
	case i < 0 && j < 0:
		k := strings.Index(doc, "\n## ")
		if k < 0 {
			if doc != "" && !strings.HasSuffix(doc, "\n") {
				doc += "\n"
			}
			return doc + "\n" + block, nil
		}
		return doc[:k+1] + block + "\n" + doc[k+1:], nil
	case i < 0 || j < 0 || j < i:
		return "", errors.New("docs/PERFORMANCE.md: the generated block's markers are unmatched; fix them by hand")
	}
	end := j + len(EndMarker)
	if end < len(doc) && doc[end] == '\n' {
		end++
	}
	return doc[:i] + block + doc[end:], nil
}
