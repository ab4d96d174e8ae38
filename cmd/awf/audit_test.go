package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sampleAudit = `{"ts":"2026-12-01T19:27:48Z","kind":"lifecycle","event":"seed-staged","detail":"repo=o/conf sensitivity=confidential commit=2ca3","awfVersion":"devel+abc","ciRunId":"77"}
{"ts":"2026-12-01T19:27:49Z","kind":"invocation","invocationId":"8ebedffa36b4bfdbba61df99","repo":"o/conf","sensitivity":"confidential","bits":2,"bucketMs":100,"elapsedMs":40,"scriptSha256":"aaaaaaaaaaaaaaaa","awfVersion":"devel+abc"}
{"ts":"2026-12-01T19:27:50Z","kind":"failure","invocationId":"8ebedffa36b4bfdbba61df9a","repo":"o/conf","sensitivity":"confidential","reason":"non-zero-exit","outcome":"nonzero-exit","bits":4,"bucketMs":1000,"elapsedMs":102,"awfVersion":"devel+abc"}
{"ts":"2026-12-01T19:27:50Z","kind":"failure","invocationId":"framing","reason":"header-rejected","awfVersion":"devel+abc"}
{"ts":"2026-12-01T19:27:51Z","kind":"lifecycle","event":"shutdown","detail":"requests=2","awfVersion":"devel+abc"}
`

func writeRun(t *testing.T, base, name, content string, mtime time.Time) string {
	t.Helper()
	d := filepath.Join(base, name)
	require.NoError(t, os.MkdirAll(d, 0o700))
	p := filepath.Join(d, auditLogName)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	require.NoError(t, os.Chtimes(p, mtime, mtime))
	return d
}

func TestAuditSummary(t *testing.T) {
	base := t.TempDir()
	now := time.Now()
	writeRun(t, base, "old", `{"kind":"lifecycle","event":"shutdown"}`+"\n", now.Add(-time.Hour))
	newest := writeRun(t, base, "new", sampleAudit, now)

	rc, out, errOut := runAWF(t, "", "audit", "summary", "--log-dir", base)
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "run: "+newest)
	assert.Contains(t, out, "awf: devel+abc")
	assert.Contains(t, out, "CI run: 77")
	assert.Contains(t, out, "queries: 2 (1 answered, 1 failed)")
	assert.Regexp(t, `Q1\s+o/conf\s+answered\s+2 b\s+100 ms\s+40 ms\s+aaaaaaaaaaaa`, out)
	assert.Regexp(t, `Q2\s+o/conf\s+failed: non-zero-exit\s+4 b\s+1000 ms\s+102 ms\s+-`, out)
	assert.Contains(t, out, "charged to o/conf: 6 of its 8-bit run budget (confidential)")
	assert.Contains(t, out, "refused outside any query: header-rejected ×1")
	assert.Contains(t, out, "staged: repo=o/conf")

	rc, md, _ := runAWF(t, "", "audit", "summary", newest, "--format=markdown")
	require.Equal(t, 0, rc)
	assert.Contains(t, md, "| Q2 | o/conf | failed: non-zero-exit | 4 b | 1000 ms | 102 ms | - |")

	rc, js, _ := runAWF(t, "", "audit", "summary", "--format", "json", newest)
	require.Equal(t, 0, rc)
	var s auditSummary
	require.NoError(t, json.Unmarshal([]byte(js), &s))
	assert.Equal(t, 1, s.Answered)
	assert.Equal(t, 1, s.Failed)
	require.Len(t, s.Repos, 1)
	assert.Equal(t, int64(6), s.Repos[0].Bits)

	rc, _, errOut = runAWF(t, "", "audit", "summary", newest, "--format", "yaml")
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, "unknown --format")

	rc, show, _ := runAWF(t, "", "audit", "show", newest)
	require.Equal(t, 0, rc)
	assert.Contains(t, show, "non-zero-exit")
	assert.Contains(t, show, "script=aaaaaaaaaaaa")
	rc, raw, _ := runAWF(t, "", "audit", "show", "--json", newest)
	require.Equal(t, 0, rc)
	assert.Equal(t, sampleAudit, raw)

	rc, _, errOut = runAWF(t, "", "audit", "summary", "--log-dir", t.TempDir())
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, "no run with an audit log")
	bad := writeRun(t, base, "bad", "{\"kind\":\n", now)
	rc, _, errOut = runAWF(t, "", "audit", "show", bad)
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, auditLogName+":1:")
}
