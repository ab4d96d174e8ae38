package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bounded-agent end-to-end tests, as far as the pieces exist: the
// configuration and its preflight through awf config validate and awf run
// (every seed failure stops the run before anything is staged, and an
// enabled subsystem is never dropped), and the CLI. A run that reaches an
// enclave needs a runtime that renders the enclave's layout; until one
// does, the run must stop at preflight, before any clone, saying so.

var agentBins struct {
	once sync.Once
	err  error
}

// buildAgentBins builds bounded-agent and agent-loop beside awf, once.
func buildAgentBins(t *testing.T) {
	t.Helper()
	agentBins.once.Do(func() {
		// As the Makefile builds them: the CLI with cgo and the seccomp tag,
		// the loop static without cgo.
		for c, env := range map[string][]string{
			"bounded-agent": {"CGO_ENABLED=1", "GOFLAGS=-tags=seccomp"},
			"agent-loop":    {"CGO_ENABLED=0", "GOFLAGS="},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, c), "github.com/awf-project/awf/cmd/"+c)
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				agentBins.err = fmt.Errorf("build %s: %v\n%s", c, err, out)
				return
			}
		}
	})
	require.NoError(t, agentBins.err)
}

const e2eAgentOpenAIKey = "sk-e2e-bounded-agent-key-0000"

// agentConfig writes a config with bounded queries and the boundedAgents
// block ba (nil: absent), an OpenAI API-proxy target pointing nowhere
// (nothing may reach it), and the shared rootfs and agent user.
func agentConfig(t *testing.T, queries bool, proxy bool, ba map[string]any) string {
	t.Helper()
	doc := map[string]any{"agent": map[string]any{"user": agentUser}}
	if queries {
		doc["boundedQueries"] = map[string]any{"enabled": true, "privateRepos": []repo{local("o/q", "internal")},
			"rootfs": map[string]any{"path": rootfsDir, "digest": rootfsHash}}
	}
	if proxy {
		doc["apiProxy"] = map[string]any{"targets": map[string]any{"openai": map[string]any{"baseUrl": "http://127.0.0.1:9"}}}
	}
	if ba != nil {
		doc["boundedAgents"] = ba
	}
	raw, err := json.Marshal(doc)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "awf.json")
	require.NoError(t, os.WriteFile(p, raw, 0o600))
	return p
}

func agentBlock(extra map[string]any) map[string]any {
	b := map[string]any{"enabled": true, "model": "gpt-4o-mini", "privateRepos": []repo{local("o/r", "internal")}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func TestBoundedAgentConfigValidate(t *testing.T) {
	validate := func(t *testing.T, path string, preflight bool) (int, string) {
		args := []string{"config", "validate"}
		if preflight {
			args = append(args, "--preflight")
		}
		cmd := exec.Command(awfBin, append(args, path)...)
		cmd.Env = append(os.Environ(), "SUDO_UID=65534", "SUDO_GID=65534")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, o.String() + e.String()
	}
	cases := []struct {
		name         string
		queries      bool
		proxy        bool
		block        map[string]any
		wantProblems []string
	}{
		{"complete", true, true, agentBlock(nil), nil},
		{"no api proxy", true, false, agentBlock(nil), []string{"apiProxy: bounded agents need the API proxy"}},
		{"no target for the profile", true, true, agentBlock(map[string]any{"profile": "anthropic"}),
			[]string{`apiProxy.targets.anthropic: boundedAgents.profile is "anthropic"`}},
		{"without queries", false, true, agentBlock(nil), []string{"boundedAgents needs boundedQueries.enabled"}},
		{"github source without credential", true, true, agentBlock(map[string]any{"privateRepos": []repo{{Repo: "o/r", Sensitivity: "internal"}}}),
			[]string{"boundedAgents.privateRepos[0].source: o/r is staged from GitHub but no staging credential is set"}},
		{"no model", true, true, map[string]any{"enabled": true, "privateRepos": []repo{local("o/r", "internal")}},
			[]string{"boundedAgents.model: is required when enabled is true"}},
		{"unknown key", true, true, agentBlock(map[string]any{"image": "x"}), []string{`unknown key "image"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := validate(t, agentConfig(t, tc.queries, tc.proxy, tc.block), false)
			if tc.wantProblems == nil {
				assert.Equal(t, 0, code, out)
				return
			}
			assert.Equal(t, 1, code, out)
			for _, w := range tc.wantProblems {
				assert.Contains(t, out, w)
			}
		})
	}
	t.Run("preflight finds the CLI and the loop", func(t *testing.T) {
		// The binaries beside this awf may or may not be built yet; the
		// check names the path either way, and passes once they are.
		buildAgentBins(t)
		code, out := validate(t, agentConfig(t, true, true, agentBlock(nil)), true)
		assert.NotContains(t, out, "bounded agents: bounded-agent")
		assert.NotContains(t, out, "bounded agents: agent-loop")
		assert.Equal(t, 0, code, out)
	})
}

// TestBoundedAgentRunStopsBeforeStaging: every preflight failure of the
// seed stops awf run before anything is staged, the agent never runs, and
// nothing of the run is left.
func TestBoundedAgentRunStopsBeforeStaging(t *testing.T) {
	buildAgentBins(t)
	script := agentScript(t, "echo AGENT_RAN yes\n")
	cases := []struct {
		name    string
		queries bool
		proxy   bool
		block   map[string]any
		want    string
	}{
		{"without queries", false, false, agentBlock(nil), "boundedAgents needs boundedQueries.enabled"},
		{"no api proxy", true, false, agentBlock(nil), "apiProxy: bounded agents need the API proxy"},
		{"no target for the profile", true, true, agentBlock(map[string]any{"profile": "anthropic"}), "apiProxy.targets.anthropic"},
		{"github source without credential", true, true, agentBlock(map[string]any{"privateRepos": []repo{{Repo: "o/r", Sensitivity: "internal"}}}), "no staging credential is set"},
		{"sbx is capability-blocked", true, true, agentBlock(map[string]any{"runtime": "sbx"}), "bounded agents: runtime sbx cannot enforce every control here; no fallback"},
		// No backend renders the enclave's layout yet: the run must stop,
		// never fall back to a query sandbox or run without the enclave.
		{"no enclave runtime", true, true, agentBlock(nil), "bounded agents: runtime direct cannot run an enclave"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runDirs()
			res := awfRun(t, agentConfig(t, tc.queries, tc.proxy, tc.block), script, "OPENAI_API_KEY="+e2eAgentOpenAIKey)
			assert.NotEqual(t, 0, res.code, "stderr:\n%s", res.stderr)
			assert.Contains(t, res.stderr, tc.want)
			assert.Contains(t, res.stderr, "preflight")
			assert.NotContains(t, res.stdout, "AGENT_RAN", "the agent ran although the run could never launch an enclave")
			assert.NotContains(t, res.stderr, "awf: staging", "something was staged before the preflight failed")
			assert.NotContains(t, res.stderr, e2eAgentOpenAIKey)
			assertNoNewRunDirs(t, before)
		})
	}
}

// TestBoundedAgentCLIOutsideARun: the CLI without its socket prints the one
// error line, nothing on stderr, exit 0, whatever it is asked.
func TestBoundedAgentCLIOutsideARun(t *testing.T) {
	buildAgentBins(t)
	for _, args := range [][]string{
		{"--repo", "o/r", "--schema", `{"type":"boolean"}`},
		{"--repo", "o/r", "--schema", `{"type":"boolean"}`, "--model", "gpt-4o"},
		{"--help"},
	} {
		cmd := exec.Command(filepath.Join(binDir, "bounded-agent"), args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Stdin = strings.NewReader("Which subsystem owns retries?")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		require.NoError(t, cmd.Run())
		assert.Equal(t, `{"status":"error"}`+"\n", o.String())
		assert.Empty(t, e.String())
	}
}
