package broker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAgentSkill(t *testing.T) {
	s := AgentSkill([]SkillRepo{
		{Repo: "o/sealed", Sensitivity: "sealed"},
		{Repo: "my-org/private-service", Sensitivity: "internal"},
		{Repo: "o/pub", Sensitivity: "public"},
		{Repo: "o/conf", Sensitivity: "confidential"},
	}, AgentSkillOptions{TimeoutSeconds: 120, MaxInvocations: 8, MaxTaskBytes: 4096})
	assert.True(t, strings.HasPrefix(s, "---\nname: bounded-agent\n"))
	for _, want := range []string{
		"- `o/sealed` — 0 bits/run (`sealed` — never launches an enclave)",
		"- `my-org/private-service` — 64 bits/run (`internal`)",
		"- `o/pub` — unmetered (`public`)",
		"- `o/conf` — 8 bits/run (`confidential`)",
		"ledger is separate from bounded queries'",
		"**Provider disclosure.**",
		"to the configured model provider",
		"at most 4096 bytes",
		"120 s of wall-clock time",
		"At most 8 requests per run",
		"charge = 1 + ceil(log2(cardinality)) + 3 bits",
		"bounded-agent --repo my-org/private-service --schema",
		"never shown",
	} {
		assert.Contains(t, s, want)
	}
	// Nothing the caller could use to choose what it cannot choose.
	for _, not := range []string{"gpt", "anthropic", "openai", "169.254", "runsc", "docker"} {
		assert.NotContains(t, strings.ToLower(s), not)
	}
}
