package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/config"
)

func loadAgentConfig(t *testing.T, doc string) *config.Config {
	t.Helper()
	c, err := config.Load([]byte(doc))
	require.NoError(t, err)
	return c
}

func TestBoundedAgentChecks(t *testing.T) {
	local := t.TempDir()
	queries := `"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/q","sensitivity":"internal","source":"` + local + `"}]}`
	proxy := `"apiProxy":{"targets":{"openai":{}}}`
	agents := func(extra string) string {
		return `"boundedAgents":{"enabled":true,"model":"gpt-4o-mini","privateRepos":[{"repo":"o/r","sensitivity":"internal","source":"` + local + `"}]` + extra + `}`
	}
	noEnv := func(string) string { return "" }
	cases := []struct {
		name string
		doc  string
		env  func(string) string
		want []string // substrings, one per problem; nil = none
	}{
		{"disabled", `{"boundedAgents":{"enabled":false}}`, noEnv, nil},
		{"complete", `{` + queries + `,` + proxy + `,` + agents("") + `}`, noEnv, nil},
		{"no queries", `{` + proxy + `,` + agents("") + `}`, noEnv, []string{"boundedAgents.enabled: boundedAgents needs boundedQueries.enabled"}},
		{"no proxy", `{` + queries + `,` + agents("") + `}`, noEnv, []string{"apiProxy: bounded agents need the API proxy"}},
		{"no target for profile", `{` + queries + `,` + proxy + `,` + agents(`,"profile":"anthropic"`) + `}`, noEnv, []string{`apiProxy.targets.anthropic: boundedAgents.profile is "anthropic" but the API proxy has no anthropic target`}},
		{"github source without token", `{` + queries + `,` + proxy + `,"boundedAgents":{"enabled":true,"model":"m","privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`, noEnv,
			[]string{"boundedAgents.privateRepos[0].source: o/r is staged from GitHub but no staging credential is set"}},
		{"github source with token", `{` + queries + `,` + proxy + `,"boundedAgents":{"enabled":true,"model":"m","privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`,
			func(k string) string {
				if k == "GH_TOKEN" {
					return "x"
				}
				return ""
			}, nil},
		{"missing local source", `{` + queries + `,` + proxy + `,"boundedAgents":{"enabled":true,"model":"m","privateRepos":[{"repo":"o/r","sensitivity":"internal","source":"/nonexistent/awf"}]}}`, noEnv,
			[]string{"boundedAgents.privateRepos[0].source: o/r cannot be staged"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := BoundedAgentChecks(loadAgentConfig(t, tc.doc), tc.env, false, "")
			require.Len(t, got, len(tc.want), "%q", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

func TestBoundedAgentHostChecks(t *testing.T) {
	local := t.TempDir()
	doc := `{"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/q","sensitivity":"internal","source":"` + local + `"}]},` +
		`"apiProxy":{"targets":{"openai":{}}},` +
		`"boundedAgents":{"enabled":true,"model":"m","runtime":"docker","privateRepos":[{"repo":"o/r","sensitivity":"internal","source":"` + local + `"}]}}`
	c := loadAgentConfig(t, doc)
	c.BoundedQueries.DockerSocket = filepath.Join(t.TempDir(), "missing.sock")
	bin := t.TempDir()
	got := BoundedAgentChecks(c, func(string) string { return "" }, true, bin)
	joined := strings.Join(got, "\n")
	assert.Contains(t, joined, "host: bounded agents: bounded-agent "+filepath.Join(bin, "bounded-agent")+" not found")
	assert.Contains(t, joined, "host: bounded agents: agent-loop "+filepath.Join(bin, "agent-loop")+" not found")
	assert.Contains(t, joined, "boundedAgents.runtime: Docker host must be a local Unix socket")

	for _, n := range []string{AgentCLIName, AgentLoopName} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, n), []byte("x"), 0o755))
	}
	c.BoundedAgents.Runtime = "direct"
	assert.Empty(t, BoundedAgentChecks(c, func(string) string { return "" }, true, bin))
}

func TestBoundedAgentsWithoutQueries(t *testing.T) {
	assert.NoError(t, BoundedAgentsWithoutQueries(loadAgentConfig(t, `{}`)))
	assert.ErrorIs(t, BoundedAgentsWithoutQueries(loadAgentConfig(t, `{"boundedAgents":{"enabled":true,"model":"m","privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`)), ErrAgentsNeedQueries)
}
