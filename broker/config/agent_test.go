package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

func TestAgentDefaults(t *testing.T) {
	c, err := Load([]byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, Agent{Network: AgentNetworkHost}, c.Agent)
	assert.Empty(t, c.Warnings)

	c, err = Load([]byte(`{"agent":{"user":"runner","env":{"allow":["OPENAI_API_KEY"]},"network":"none","allowPersistedCredentials":true}}`))
	require.NoError(t, err)
	assert.Equal(t, Agent{User: "runner", EnvAllow: []string{"OPENAI_API_KEY"}, Network: AgentNetworkNone, AllowPersistedCredentials: true}, c.Agent)
	require.Len(t, c.Warnings, 1)
	assert.Contains(t, c.Warnings[0], "agent.allowPersistedCredentials is true")
}

func TestAllowRefusesGitHubAndActionsWithTheReason(t *testing.T) {
	_, err := Load([]byte(`{"agent":{"env":{"allow":["OPENAI_API_KEY","GH_ENTERPRISE_TOKEN","ACTIONS_ID_TOKEN_REQUEST_URL"]}}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `agent.env.allow[1]: "GH_ENTERPRISE_TOKEN" is a GitHub credential: it never reaches the agent when bounded queries are enabled`)
	assert.Contains(t, err.Error(), `agent.env.allow[2]: "ACTIONS_ID_TOKEN_REQUEST_URL" is an Actions runtime variable`)
}

// TestAllowedVariableSchemaIsProtosRule checks that the schema's
// allowedVariable spells proto's rule: its enum is the GitHub list and its
// suffix pattern the credential suffixes, and on a corpus of names built
// from every list, prefix and suffix the loader and the schema agree.
func TestAllowedVariableSchemaIsProtosRule(t *testing.T) {
	root, err := DecodeJSON(Schema())
	require.NoError(t, err)
	def := root.(map[string]any)["$defs"].(map[string]any)["allowedVariable"].(map[string]any)
	anyOf := def["not"].(map[string]any)["anyOf"].([]any)
	var enum []string
	for _, e := range anyOf[0].(map[string]any)["enum"].([]any) {
		enum = append(enum, e.(string))
	}
	assert.Equal(t, proto.GitHubCredentialVariables(), enum)
	sfx := anyOf[2].(map[string]any)["allOf"].([]any)[1].(map[string]any)["pattern"]
	assert.Equal(t, "(?:"+strings.Join(proto.CredentialVariableSuffixes(), "|")+")$", sfx)

	names := append(proto.CredentialVariableNames(), "PATH", "GITHUB_REPOSITORY", "GH_HOST", "COPILOT", "MY_KEY", "GITHUBX", "ACTIONS", "X_ACTIONS_TOKEN")
	for _, p := range append(proto.CredentialVariablePrefixes(), "GH_", "COPILOT_", "X_GITHUB_", "GITHUB", "XGITHUB", "GHX_", "MY_", "") {
		for _, s := range append(proto.CredentialVariableSuffixes(), "", "_URL", "TOKEN", "_ID") {
			names = append(names, p+s, p+"X"+s)
		}
	}
	for _, n := range names {
		b, _ := json.Marshal(n)
		doc := fmt.Sprintf(`{"agent":{"env":{"allow":[%s]}}}`, b)
		_, lerr := Load([]byte(doc))
		serr := checkSchema(t, []byte(doc))
		assert.Equal(t, lerr == nil, serr == nil, "%s: loader=%v schema=%v", n, lerr, serr)
		if envName().MatchString(n) {
			assert.Equal(t, proto.NeverAllowed(n), lerr != nil, "%s: %v", n, lerr)
		}
	}
}
