package bench

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/report.md from testdata/report.json")

// TestRenderFixture renders a recorded run (testdata/report.json) and
// compares it with the checked-in markdown; -update rewrites the latter.
func TestRenderFixture(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "report.json"))
	require.NoError(t, err)
	var rep Report
	require.NoError(t, json.Unmarshal(raw, &rep))
	rep.Ratios()
	rep.CheckTargets()
	md := rep.Markdown()
	golden := filepath.Join("testdata", "report.md")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(md), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), md)
	assert.True(t, strings.HasPrefix(md, BeginMarker+"\n"))
	assert.True(t, strings.HasSuffix(md, EndMarker+"\n"))
	// The JSON round-trips.
	js, err := rep.JSON()
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, rep.Targets, back.Targets)
}

func TestReplaceBlock(t *testing.T) {
	block := BeginMarker + "\nnew\n" + EndMarker + "\n"
	doc := "# Performance\n\nintro\n\n## Summary\n\nhand\n"
	got, err := ReplaceBlock(doc, block)
	require.NoError(t, err)
	assert.Equal(t, "# Performance\n\nintro\n\n"+block+"\n## Summary\n\nhand\n", got)

	again, err := ReplaceBlock(got, BeginMarker+"\nnewer\n"+EndMarker+"\n")
	require.NoError(t, err)
	assert.Equal(t, "# Performance\n\nintro\n\n"+BeginMarker+"\nnewer\n"+EndMarker+"\n\n## Summary\n\nhand\n", again)

	_, err = ReplaceBlock("x\n"+BeginMarker+"\nold\n", block)
	require.Error(t, err, "an unmatched marker is never overwritten")
	_, err = ReplaceBlock(EndMarker+"\n"+BeginMarker+"\n", block)
	require.Error(t, err)

	got, err = ReplaceBlock("no sections", block)
	require.NoError(t, err)
	assert.Equal(t, "no sections\n\n"+block, got)
}

func TestSummarise(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := Summarise(ds)
	assert.Equal(t, Stats{N: 20, MedianMS: 10.5, P95MS: 19, MinMS: 1, MaxMS: 20}, s)
	assert.Equal(t, Stats{N: 1, MedianMS: 3, P95MS: 3, MinMS: 3, MaxMS: 3}, Summarise([]time.Duration{3 * time.Millisecond}))
	assert.Equal(t, Stats{}, Summarise(nil))
}

func TestBucketName(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Millisecond:        "10 ms",
		10 * time.Millisecond:   "10 ms",
		11 * time.Millisecond:   "100 ms",
		999 * time.Millisecond:  "1 s",
		61 * time.Second:        "600 s",
		601 * time.Second:       "overflow",
		10*time.Millisecond + 1: "100 ms",
	} {
		assert.Equal(t, want, BucketName(d), "%v", d)
	}
	assert.Equal(t, "10 ms ×2, 1 s ×1", bucketText(Buckets([]time.Duration{time.Millisecond, 2 * time.Millisecond, 500 * time.Millisecond})))
}

// TestComparisons: the bootstrap comparison is made only when the row ran,
// says PASS or MISS by the same 1.5× bound, and is rendered apart from the
// issue's targets.
func TestComparisons(t *testing.T) {
	cell := func(row string, ms float64) Cell {
		return Cell{Row: row, Repo: targetRepo, Workload: targetWorkload, Processing: Stats{N: 10, MedianMS: ms, P95MS: ms}}
	}
	for _, tc := range []struct {
		name       string
		cold, boot float64
		want       []string
	}{
		{"within", 30, 25, []string{"PASS", "INFO"}},
		{"over", 47, 25, []string{"MISS", "INFO"}},
		{"not run", 47, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Report{Cells: []Cell{cell(RowDirectCold, tc.cold), cell(RowBwrap, 13)}}
			if tc.boot > 0 {
				rep.Cells = append(rep.Cells, cell(RowBwrapBootstrap, tc.boot))
			}
			rep.CheckTargets()
			var got []string
			for _, c := range rep.Comparisons {
				got = append(got, c.Status)
			}
			assert.Equal(t, tc.want, got)
			for _, tg := range rep.Targets {
				assert.NotContains(t, tg.Name, "same bootstrap", "a comparison is never listed as a target")
			}
			md := rep.Markdown()
			assert.Equal(t, tc.want != nil, strings.Contains(md, "Not targets: where the misses lie"))
		})
	}
}

// The client's start-up is read against the Go runtime's own when the run
// measured it, and only then.
func TestStartupFloor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor Stats
		info  bool
	}{
		{"measured", Stats{N: 10, MedianMS: 5.2, P95MS: 6}, true},
		{"older report", Stats{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Report{Startup: Startup{Argument: "no arguments", Client: Stats{N: 10, MedianMS: 6, P95MS: 7}, BinTrue: Stats{N: 10, MedianMS: 2}, GoFloor: tc.floor}}
			rep.CheckTargets()
			var names []string
			for _, c := range rep.Comparisons {
				names = append(names, c.Name)
				assert.Equal(t, "INFO", c.Status)
				assert.Contains(t, c.Detail, "6.00 ms against 5.20 ms: 1.15×, +0.80 ms")
			}
			assert.Equal(t, tc.info, len(names) == 1, "comparisons %v", names)
			md := rep.Markdown()
			assert.Equal(t, tc.info, strings.Contains(md, "Not targets: where the misses lie"))
			assert.Equal(t, tc.info, strings.Contains(md, "a Go program that only prints the same line"))
			assert.Contains(t, md, "| `bounded-query` start-up < 5 ms | **MISS** |")
		})
	}
}

// The size targets read the interleaved measurement when the run made one,
// and the cells otherwise.
func TestScalingTargets(t *testing.T) {
	cell := func(row, repo string, ms float64) Cell {
		return Cell{Row: row, Repo: repo, Workload: targetWorkload, Processing: Stats{N: 10, MedianMS: ms, P95MS: ms}}
	}
	// The cells drifted: 100k is 1.3× the 10-file median.
	cells := []Cell{cell(RowDirectWarm, RepoSmall, 8), cell(RowDirectWarm, RepoLarge, 10.4)}
	status := func(rep *Report) (string, string) {
		rep.CheckTargets()
		for _, tg := range rep.Targets {
			if strings.HasPrefix(tg.Name, RowDirectWarm+": 100k") {
				return tg.Status, tg.Detail
			}
		}
		return "", ""
	}
	for _, tc := range []struct {
		name    string
		scaling []Scaling
		want    string
		detail  string
	}{
		{"cells only", nil, "MISS", "100k 10.40 ms, 10 files 8.00 ms: 1.30×"},
		{"interleaved", []Scaling{{Row: RowDirectWarm, Small: Stats{N: 30, MedianMS: 8}, Large: Stats{N: 30, MedianMS: 8.4}}}, "PASS", "100k 8.40 ms, 10 files 8.00 ms: 1.05× (interleaved, n=30 and 30)"},
		{"interleaved over", []Scaling{{Row: RowDirectWarm, Small: Stats{N: 30, MedianMS: 8}, Large: Stats{N: 30, MedianMS: 10}}}, "MISS", "1.25× (interleaved"},
		{"blocked falls back", []Scaling{{Row: RowDirectWarm, Blocked: "failed"}}, "MISS", "1.30×"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Report{Cells: cells, Scaling: tc.scaling}
			st, detail := status(&rep)
			assert.Equal(t, tc.want, st)
			assert.Contains(t, detail, tc.detail)
			md := rep.Markdown()
			assert.Equal(t, len(tc.scaling) > 0, strings.Contains(md, "### Size: the 10-file against the 100k-file repository, interleaved"))
		})
	}
}
