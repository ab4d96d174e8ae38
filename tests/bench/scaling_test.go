package bench

import (
	"context"
	"fmt"
	"time"
)

// scalingRounds is how many samples each size takes per row (quick: 3).
const scalingRounds = 30

// measureScaling times the rows the size targets read (direct warm and
// cold) on the small and the large repository alternately, round by round,
// the order flipping each round, for the reason Scaling gives. (In one run
// every row, the host floor included, was 1.3-1.4× slower in the 100k
// cells than in the 10-file cells.)
func (s *suite) measureScaling(rows []rowDef, small, large *benchRepo, w Workload) []Scaling {
	logf("bench: size: %s against %s files, %s, interleaved", small.id, large.id, w.ID)
	ctx := context.Background()
	n := scalingRounds
	if s.p.quick {
		n = 3
	}
	var out []Scaling
	for _, row := range rows {
		if row.ID != RowDirectWarm && row.ID != RowDirectCold {
			continue
		}
		sc := Scaling{Row: row.ID, Blocked: row.blocked}
		if sc.Blocked == "" {
			sc.Small, sc.Large, sc.Blocked = s.alternate(ctx, row, small, large, w, n)
		}
		if sc.Blocked != "" {
			logf("bench:   %-12s %s", row.ID, sc.Blocked)
		} else {
			logf("bench:   %-12s %s median %.2f ms, %s median %.2f ms", row.ID, small.id, sc.Small.MedianMS, large.id, sc.Large.MedianMS)
		}
		out = append(out, sc)
	}
	return out
}

// alternate runs row on a and b in turn, n samples each after one untimed
// run of each, and returns their processing times or why it stopped.
func (s *suite) alternate(ctx context.Context, row rowDef, a, b *benchRepo, w Workload, n int) (Stats, Stats, string) {
	var runs [2]runner
	for i, r := range []*benchRepo{a, b} {
		run, err := row.make(r, w)
		if err != nil {
			return Stats{}, Stats{}, fmt.Sprintf("%s files: %v", r.id, err)
		}
		defer run.close()
		if _, err := run.once(ctx); err != nil {
			return Stats{}, Stats{}, fmt.Sprintf("%s files: failed: %v", r.id, err)
		}
		runs[i] = run
	}
	var procs [2][]time.Duration
	for round := 0; round < n; round++ {
		for k := 0; k < 2; k++ {
			i := (round + k) % 2
			sm, err := runs[i].once(ctx)
			if err != nil {
				return Stats{}, Stats{}, fmt.Sprintf("failed after %d rounds: %v", round, err)
			}
			procs[i] = append(procs[i], sm.proc)
		}
	}
	return Summarise(procs[0]), Summarise(procs[1]), ""
}
