package e2e

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLedgerSequencesPerSensitivity runs the seed's cost examples through the
// real CLI, broker and sandbox: a confidential repo funds exactly two const
// queries (or one boolean), an internal repo twelve booleans and then one
// const, a sealed repo none, and a public repo any number. Each answer's
// wall time, measured by the agent, is never shorter than its bucket.
func TestLedgerSequencesPerSensitivity(t *testing.T) {
	before := runDirs()
	cfg := writeConfig(t, bq{
		PrivateRepos: []repo{local("demo/conf", "confidential"), local("demo/conf2", "confidential"),
			local("demo/int", "internal"), local("demo/sealed", "sealed"), local("demo/pub", "public")},
		MaxInvocations: 40,
	})
	script := agentScript(t, `
C='{"type":"const","value":1}'
B='{"type":"boolean"}'
printf 'open("/query/out","w").write("1")\n' > /tmp/c.$$.py
printf 'import os\nopen("/query/out","w").write("true" if os.path.isfile("/query/repo/SECURITY.md") else "false")\n' > /tmp/b.$$.py
n=0
ask() { # repo schema script
  n=$((n+1))
  t0=$(date +%s%N)
  out=$(bounded-query --repo "$1" --schema "$2" < "$3")
  t1=$(date +%s%N)
  echo "Q$n $1 $(( (t1-t0)/1000000 )) $out"
}
ask demo/conf "$C" /tmp/c.$$.py; ask demo/conf "$C" /tmp/c.$$.py; ask demo/conf "$C" /tmp/c.$$.py
ask demo/conf2 "$B" /tmp/b.$$.py; ask demo/conf2 "$B" /tmp/b.$$.py
i=0; while [ $i -lt 13 ]; do ask demo/int "$B" /tmp/b.$$.py; i=$((i+1)); done
ask demo/int "$C" /tmp/c.$$.py; ask demo/int "$C" /tmp/c.$$.py
ask demo/sealed "$C" /tmp/c.$$.py
i=0; while [ $i -lt 5 ]; do ask demo/pub "$C" /tmp/c.$$.py; i=$((i+1)); done
rm -f /tmp/c.$$.py /tmp/b.$$.py
`)
	r := awfRun(t, cfg, script)
	require.Equal(t, 0, r.code, r.stderr)
	type answer struct {
		repo string
		ms   int
		out  string
	}
	var got []answer
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.SplitN(l, " ", 4)
		require.Len(t, f, 4, l)
		ms, err := strconv.Atoi(f[2])
		require.NoError(t, err)
		got = append(got, answer{f[1], ms, f[3]})
	}
	ok1 := `{"status":"ok","result":1}`
	okT := `{"status":"ok","result":true}`
	want := []string{ok1, ok1, errLine, okT, errLine}
	for i := 0; i < 12; i++ {
		want = append(want, okT)
	}
	want = append(want, errLine, ok1, errLine, errLine, ok1, ok1, ok1, ok1, ok1)
	require.Len(t, got, len(want))
	for i, w := range want {
		assert.Equal(t, w, got[i].out, "answer %d (%s)", i+1, got[i].repo)
	}

	// Timing: every launched query's audit record names its bucket, and the
	// agent never got the answer before it.
	recs := queryRecords(auditRecords(t, r.stderr))
	require.Len(t, recs, len(want))
	launched := 0
	for i, rec := range recs {
		b, ok := rec["bucketMs"].(float64)
		if !ok {
			continue // rejected before the debit: answered at once
		}
		launched++
		assert.GreaterOrEqual(t, got[i].ms, int(b), "answer %d arrived before its %v ms bucket", i+1, b)
	}
	assert.Equal(t, 21, launched, "launched = answered queries")
	assertNoNewRunDirs(t, before)
}
