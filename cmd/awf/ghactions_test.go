package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGitHubActionsAnnotations: in a job, a failure becomes one ::error::
// line whose message cannot end the command or start another; outside a
// job nothing is printed.
func TestGitHubActionsAnnotations(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		msg  string
		want string
	}{
		{"outside a job", map[string]string{}, "x", ""},
		{"GITHUB_ACTIONS not true", map[string]string{"GITHUB_ACTIONS": "1"}, "x", ""},
		{"plain", map[string]string{"GITHUB_ACTIONS": "true"}, "preflight: no runsc", "::error title=awf run::preflight: no runsc\n"},
		{"escaped", map[string]string{"GITHUB_ACTIONS": "true"}, "100% bad\n::warning::forged\r", "::error title=awf run::100%25 bad%0A::warning::forged%0D\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			g := newGitHubActions(func(k string) string { return c.env[k] }, &b)
			g.errorf("awf run", "%s", c.msg)
			assert.Equal(t, c.want, b.String())
		})
	}
}

// TestGitHubActionsSummary: the run's audit summary is appended to the job
// summary in the markdown of awf audit summary; a summary that cannot be
// written is reported on stderr, not fatal.
func TestGitHubActionsSummary(t *testing.T) {
	dir := writeRun(t, t.TempDir(), "run", sampleAudit, time.Now())
	summary := filepath.Join(t.TempDir(), "summary.md")
	require.NoError(t, os.WriteFile(summary, []byte("earlier step\n"), 0o644))
	env := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": summary}
	var errOut bytes.Buffer
	newGitHubActions(func(k string) string { return env[k] }, &errOut).appendSummary(dir, auditLogName)
	assert.Empty(t, errOut.String())
	got, err := os.ReadFile(summary)
	require.NoError(t, err)
	assert.Contains(t, string(got), "earlier step\n## awf bounded queries\n")
	assert.Contains(t, string(got), "| Q2 | o/conf | failed: non-zero-exit | 4 b | 1000 ms | 102 ms | - |")

	env["GITHUB_STEP_SUMMARY"] = filepath.Join(t.TempDir(), "missing", "summary.md")
	newGitHubActions(func(k string) string { return env[k] }, &errOut).appendSummary(dir, auditLogName)
	assert.Contains(t, errOut.String(), "awf: job summary:")
}

// TestRunAnnotatesFailuresInAJob: awf run's own failure is also an
// annotation when GITHUB_ACTIONS=true.
func TestRunAnnotatesFailuresInAJob(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "true")
	rc, _, errOut := runAWF(t, "", "run", "--config", filepath.Join(t.TempDir(), "none.json"), "--", "true")
	assert.Equal(t, exitAWF, rc)
	assert.Contains(t, errOut, "awf run: ")
	assert.Regexp(t, `(?m)^::error title=awf run::.*none\.json`, errOut)
}
