package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const errLine = `{"status":"error"}`

// q is the agent-side helper: it runs the real CLI, then prints
// "NAME rc=<status> stderr=<bytes> <stdout line>".
var qHelper = cliHelper("q", "bounded-query")

func TestFailurePathsAreByteIdentical(t *testing.T) {
	before := runDirs()
	cfg := writeConfig(t, bq{
		PrivateRepos:   []repo{local("demo/pub", "public"), local("demo/sealed", "sealed")},
		Timeout:        1,
		MaxInvocations: 11,
	})
	script := agentScript(t, qHelper+`
B='{"type":"boolean"}'
echo 'import json; json.dump(True, open("/query/out","w"))' > /tmp/ok.$$.py
q ok --repo demo/pub --schema "$B" < /tmp/ok.$$.py
q invalid-schema --repo demo/pub --schema '{"type":"string"}' < /tmp/ok.$$.py
q unknown-repo --repo demo/other --schema "$B" < /tmp/ok.$$.py
q budget-exhausted --repo demo/sealed --schema '{"type":"const","value":1}' < /tmp/ok.$$.py
echo 'import time; time.sleep(30)' | q timeout --repo demo/pub --schema "$B"
echo 'raise SystemExit(3)' | q crash --repo demo/pub --schema "$B"
echo 'open("/query/out","w").write("\"yes\"")' | q nonconformant --repo demo/pub --schema "$B"
echo 'open("/query/out","w").write(" "*9000+"true")' | q oversized --repo demo/pub --schema "$B"
echo 'open("/query/out","w").write("true true")' | q trailing --repo demo/pub --schema "$B"
echo 'import os; os.symlink("/etc/passwd","/query/out")' | q symlink-output --repo demo/pub --schema "$B"
q last-counted --repo demo/pub --schema "$B" < /tmp/ok.$$.py
q invocation-cap --repo demo/pub --schema "$B" < /tmp/ok.$$.py
AWF_BOUNDED_QUERY_SOCKET=/nonexistent/broker.sock q broker-down --repo demo/pub --schema "$B" < /tmp/ok.$$.py
q bad-args --repo demo/pub --schema "$B" --extra < /tmp/ok.$$.py
rm -f /tmp/ok.$$.py
`)
	r := awfRun(t, cfg, script)
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	assert.Equal(t, `rc=0 stderr=0 {"status":"ok","result":true}`, got["ok"])
	assert.Equal(t, `rc=0 stderr=0 {"status":"ok","result":true}`, got["last-counted"])
	for _, name := range []string{"invalid-schema", "unknown-repo", "budget-exhausted", "timeout", "crash",
		"nonconformant", "oversized", "trailing", "symlink-output", "invocation-cap", "broker-down", "bad-args"} {
		assert.Equal(t, "rc=0 stderr=0 "+errLine, got[name], name)
	}
	// The reasons are only in the protected audit log.
	reasons := map[string]bool{}
	for _, rec := range auditRecords(t, r.stderr) {
		if rec["kind"] == "failure" {
			reasons[rec["reason"].(string)] = true
		}
	}
	for _, want := range []string{"invalid-request", "repo-not-allowed", "bit-budget-exhausted", "timeout",
		"non-zero-exit", "nonconformant-output", "unreadable-output", "invocation-count-exhausted"} {
		assert.True(t, reasons[want], "audit reason %s missing; have %v", want, reasons)
	}
	assert.False(t, strings.Contains(r.stdout, "reason"), "no reason reaches the agent")
	assertNoNewRunDirs(t, before)
}
