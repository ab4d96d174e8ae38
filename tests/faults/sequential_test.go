package faults

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sequentialQueries is how many queries TestSequentialQueriesLeakNothing
// runs per runtime: AWF_FAULTS_QUERIES (the 500), or a count that
// keeps make test inside its budget.
func sequentialQueries(t *testing.T) int {
	t.Helper()
	s := os.Getenv("AWF_FAULTS_QUERIES")
	if s == "" {
		return 40
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "AWF_FAULTS_QUERIES")
	require.Greater(t, n, 1, "AWF_FAULTS_QUERIES")
	return n
}

// TestSequentialQueriesLeakNothing: one run answers N sequential queries.
// After the first, the test counts what the run holds (processes, fds of
// awf, its watchdog and its broker, mounts in the broker's namespace,
// cgroups, bytes under the private root outside the audit log); after the
// last, every count is the same: nothing grows per query. Both counts are
// taken once the warm pool holds its one idle sandbox again (barrierLine).
// Every answer is the canonical success, the audit holds one invocation
// record each, and after the run nothing is left.
func TestSequentialQueriesLeakNothing(t *testing.T) {
	n := sequentialQueries(t)
	for _, rt := range allRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			script := agentScript(t, "")
			g := newGates(script)
			body := "echo started\n" + queryLine(0) + barrierLine + "echo warm\n" + g.wait(1) +
				"i=1\nwhile [ $i -lt " + strconv.Itoa(n) + " ]; do\n" + queryLine(0) + "i=$((i+1))\ndone\n" + barrierLine + "echo done\n" + g.wait(2)
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+body), 0o755))
			r := startRun(t, configWith(t, rt, n+2, "public", "", 30), script)
			id := r.runID(t)
			r.waitStdout(t, "warm")
			before := measure(t, r.cmd.Process.Pid, id)
			started := time.Now()
			g.open(t, 1)
			// A liveness bound, not a speed one: after each query the warm
			// pool's refill holds the lane to the timing bucket of its own
			// duration, and a gvisor refill on a loaded host (load 16 on 2
			// cores) often takes over 1 s: the next query then waits for
			// the 10 s bucket (measured: 5 s a query on average there).
			waitStdoutWithin(t, r, "done", time.Duration(n)*15*time.Second)
			took := time.Since(started)
			after := measure(t, r.cmd.Process.Pid, id)
			t.Logf("%s: %d queries after the first in %v (%v each); holdings %s", rt, n-1, took.Round(time.Millisecond),
				(took / time.Duration(n-1)).Round(time.Millisecond), after)
			assert.Equal(t, before.String(), after.String(), "the run grew over %d queries\nbefore:\n  %s\nafter:\n  %s",
				n-1, strings.Join(before.detail, "\n  "), strings.Join(after.detail, "\n  "))
			g.open(t, 2)
			require.Equal(t, 0, r.wait(t, 2*time.Minute), r.stderr.String())
			assertNothingLeftOn(t, rt, id, time.Now())
			out := r.stdout.String()
			assertCanonical(t, out, "started", "warm", "done", barrierOut)
			require.Equal(t, 2, strings.Count(out, barrierOut+"\n"))
			resp := queryResponses(out)
			require.Len(t, resp, n)
			for i, x := range resp {
				require.Equal(t, okTrue, x, "query %d", i)
			}
			all := audit(t, id)
			assert.NotContains(t, events(all), "cancelled", "a run nobody cancelled")
			assert.NotContains(t, events(all), "shutdown-cleanup-failed")
			why := reasons(answered(all))
			invocations := 0
			for _, w := range why {
				if w == "invocation" {
					invocations++
				}
			}
			require.Equal(t, n, invocations, "one invocation record per query: %v", why)
		})
	}
}
