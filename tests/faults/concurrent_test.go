package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFiftyConcurrentClients: 50 agent clients query one broker at once
// with maxInvocations 5. Every client gets a canonical envelope, at most
// five are charged, every response is in the audit, and the run ends
// clean. On every runtime (docker on a private Engine).
func TestFiftyConcurrentClients(t *testing.T) {
	k := newKillRuntimes(t)
	for _, rt := range k.rts {
		t.Run(rt, func(t *testing.T) { fiftyClients(t, rt, k.engineOf(t, rt)) })
	}
}

func fiftyClients(t *testing.T, rt string, e *engine) {
	const clients, max = 50, 5
	script := "echo started\ni=0\nwhile [ $i -lt 50 ]; do\n  ( " + strings.TrimSuffix(queryLine(0), "\n") + " ) &\n  i=$((i+1))\ndone\nwait\necho end\n"
	cfg := killConfig(t, rt, e, max)
	r := startRun(t, cfg, agentScript(t, script))
	id := r.runID(t)
	require.Equal(t, 0, r.wait(t, 3*time.Minute), r.stderr.String())
	assertNothingLeft(t, id, time.Now())
	assertNoContainers(t, e, id, time.Now())
	out := r.stdout.String()
	assertCanonical(t, out, "started", "end")
	answers := strings.Count(out, "Q ")
	assert.Equal(t, clients, answers, "every client gets one response")
	assert.LessOrEqual(t, strings.Count(out, "Q "+okTrue), max)

	recs := audit(t, id)
	charged, other := 0, 0
	for _, rec := range recs {
		switch rec["kind"] {
		case "invocation":
			charged++
		case "failure":
			if id, _ := rec["invocationId"].(string); len(id) == 24 {
				charged++
			} else {
				other++
			}
		}
	}
	assert.LessOrEqual(t, charged, max, "more invocations ran than maxInvocations")
	assert.Equal(t, clients, charged+other, "every response is audited")
}
