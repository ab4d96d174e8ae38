package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
)

// sameConfig is one configuration in both syntaxes.
func sameConfig(repo string) (jsonDoc, yamlDoc string) {
	jsonDoc = fmt.Sprintf(`{"agent":{"user":"nobody","network":"host","env":{"allow":["OPENAI_API_KEY"]}},`+
		`"boundedQueries":{"enabled":true,"runtime":"gvisor","timeout":45,"memoryLimit":"1g","maxInvocations":7,`+
		`"privateRepos":[{"repo":"o/r","sensitivity":"internal","source":%q},{"repo":"o/docs","sensitivity":"public","source":%q,"ref":"main"}]}}`, repo, repo)
	yamlDoc = fmt.Sprintf(`# the same configuration, in YAML
agent:
  user: nobody
  network: host
  env:
    allow: [OPENAI_API_KEY]
boundedQueries:
  enabled: true
  runtime: gvisor
  timeout: 45
  memoryLimit: 1g
  maxInvocations: 7
  privateRepos:
    - repo: o/r
      sensitivity: internal
      source: %s
    - {repo: o/docs, sensitivity: public, source: %q, ref: main}
`, repo, repo)
	return jsonDoc, yamlDoc
}

// TestConfigValidateSameFromEverySource: one configuration, as JSON and as
// YAML, from a file and from standard input, validates to the same verdict.
func TestConfigValidateSameFromEverySource(t *testing.T) {
	jsonDoc, yamlDoc := sameConfig(t.TempDir())
	dir := t.TempDir()
	type source struct{ name, file, stdin string }
	var sources []source
	for name, doc := range map[string]string{"awf.json": jsonDoc, "awf.yaml": yamlDoc, "awf.yml": yamlDoc} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
		sources = append(sources, source{name, p, ""})
	}
	sources = append(sources, source{"stdin JSON", "-", jsonDoc}, source{"stdin YAML", "-", yamlDoc})
	var want string
	for _, s := range sources {
		for _, args := range [][]string{{"config", "validate", s.file}, {"config", "validate", "--config", s.file}, {"config", "validate", "--config=" + s.file}} {
			rc, out, errOut := runAWF(t, s.stdin, args...)
			require.Equal(t, 0, rc, "%s %v: %s", s.name, args, errOut)
			assert.Empty(t, errOut, s.name)
			if want == "" {
				want = out
			}
			assert.Equal(t, want, out, "%s %v", s.name, args)
		}
	}
	assert.Equal(t, "config ok: bounded queries enabled, runtime gvisor, 2 repositories, timeout 45s, memory 1g, maxInvocations 7\n", want)
}

// TestRunSameFromEverySource: awf run gives the agent the same run whether
// its configuration is JSON or YAML, a file or standard input.
func TestRunSameFromEverySource(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "awf run needs root to run the agent as nobody")
	exe := awfBinary(t)
	dir := t.TempDir()
	jsonDoc := `{"agent":{"user":"nobody","network":"host"},"boundedQueries":{"enabled":false,"timeout":30}}`
	yamlDoc := "agent:\n  user: nobody\n  network: host\nboundedQueries:\n  enabled: false\n  timeout: 30\n"
	for name, doc := range map[string]string{"awf.json": jsonDoc, "awf.yaml": yamlDoc} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o600))
	}
	run := func(cfg, stdin string) (int, string) {
		// The agent prints its uid and what is left of its standard input:
		// nothing, when the configuration came from there.
		return runBinary(t, exe, dir, nil, stdin, "run", "--config", cfg, "--", "/bin/sh", "-c", "id -u; cat")
	}
	for _, tc := range []struct{ name, cfg, stdin string }{
		{"JSON file", filepath.Join(dir, "awf.json"), ""},
		{"YAML file", filepath.Join(dir, "awf.yaml"), ""},
		{"JSON on stdin", "-", jsonDoc},
		{"YAML on stdin", "-", yamlDoc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, out := run(tc.cfg, tc.stdin)
			assert.Equal(t, 0, rc, out)
			assert.Equal(t, "65534\n", out)
		})
	}
}

// TestConfigYAMLProblemsNameTheirPlace: every YAML problem, from the YAML
// reader or from the loader, is reported as FILE:LINE:COLUMN, by awf config
// validate and by awf run alike.
func TestConfigYAMLProblemsNameTheirPlace(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "awf run's checks need root")
	exe := awfBinary(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"loader problems", "boundedQueries:\n  timeout: 900\n  runtim: direct\nagent:\n  user: Bob\n",
			[]string{"cfg.yaml:2:12: boundedQueries.timeout: 900 is out of range 1..540", `cfg.yaml:3:3: boundedQueries: unknown key "runtim"`, `cfg.yaml:5:9: agent.user: "Bob" is not a user name`}},
		{"anchor", "agent: &a\n  user: nobody\n", []string{"cfg.yaml:1:8: agent: anchors are not allowed (&a)"}},
		{"duplicate key", "agent:\n  user: nobody\n  user: root\n", []string{`cfg.yaml:3:3: agent: duplicate key "user" (first at 2:3)`}},
		{"yes", "boundedQueries:\n  enabled: yes\n", []string{"cfg.yaml:2:12: boundedQueries.enabled: plain yes is a boolean"}},
		{"two documents", "agent: {}\n---\nagent: {}\n", []string{"cfg.yaml:2:1: a second document starts here"}},
		{"syntax", "agent:\n\tuser: x\n", []string{"cfg.yaml:2: invalid YAML: found character that cannot start any token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "cfg.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte(tc.doc), 0o600))
			run := func(stdin string, args ...string) (int, string) { return runBinary(t, exe, dir, nil, stdin, args...) }
			rc, out := run("", "config", "validate", "cfg.yaml")
			assert.Equal(t, 1, rc, out)
			for _, w := range tc.want {
				assert.Contains(t, out, "awf config validate: "+w+"", "validate")
			}
			assert.Contains(t, out, fmt.Sprintf("%d problem(s)", len(tc.want)))
			rc, out = run(tc.doc, "config", "validate", "-")
			assert.Equal(t, 1, rc, out)
			for _, w := range tc.want {
				assert.Contains(t, out, "awf config validate: <stdin>:"+strings.TrimPrefix(w, "cfg.yaml:"), "validate from stdin")
			}
			rc, out = run("", "run", "--config", "cfg.yaml", "--", "/bin/true")
			assert.Equal(t, exitAWF, rc, out)
			for _, w := range tc.want {
				assert.Contains(t, out, w, "run")
			}
		})
	}
}

// TestConfigStdinMustNotBeATerminal: --config - on a terminal is refused at
// once, by every command that takes --config, instead of waiting for input.
func TestConfigStdinMustNotBeATerminal(t *testing.T) {
	tty := fixture.OpenPTY(t)
	for _, tc := range []struct {
		args []string
		rc   int
	}{
		{[]string{"config", "validate", "-"}, 1},
		{[]string{"config", "validate", "--config", "-"}, 1},
		{[]string{"run", "--config", "-", "--", "/bin/true"}, exitAWF},
		{[]string{"broker", "--config", "-"}, 1},
		{[]string{"config", "validate", "--config=-"}, 1},
		{[]string{"run", "--config=-", "--", "/bin/true"}, exitAWF},
		{[]string{"broker", "--config=-"}, 1},
	} {
		var out, errb bytes.Buffer
		rc := realMain(tc.args, tty, &out, &errb)
		assert.Equal(t, tc.rc, rc, "%v: %s", tc.args, errb.String())
		assert.Contains(t, errb.String(), "standard input, which is a terminal", "%v", tc.args)
		assert.Empty(t, out.String(), "%v", tc.args)
	}
	// Not a terminal: an empty standard input is an empty document.
	rc, _, errOut := runAWF(t, "", "config", "validate", "-")
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, "the document is empty")
	assert.NotContains(t, errOut, "terminal")
}

// TestConfigStdinIsBounded: standard input is read up to the configuration
// cap and no further.
func TestConfigStdinIsBounded(t *testing.T) {
	big := strings.Repeat("#", 1<<20) + "\n"
	rc, _, errOut := runAWF(t, big, "config", "validate", "-")
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, "is larger than 1048576 bytes")
	var out, errb bytes.Buffer
	rc = realMain([]string{"config", "validate", "-"}, io.MultiReader(strings.NewReader(big), endless{}), &out, &errb)
	assert.Equal(t, 1, rc, "an endless standard input is cut at the cap")
	assert.Contains(t, errb.String(), "is larger than 1048576 bytes")
}

// endless is a reader that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}
