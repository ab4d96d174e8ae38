package broker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSkill(t *testing.T) {
	s := Skill([]SkillRepo{{"o/int", "internal"}, {"o/pub", "public"}, {"o/conf", "confidential"}, {"o/seal", "sealed"}}, 30, 32)
	for _, want := range []string{
		"name: bounded-query",
		"- `o/int` — 64 bits/run (`internal`)",
		"- `o/pub` — unmetered (`public`)",
		"- `o/conf` — 8 bits/run (`confidential`)",
		"- `o/seal` — 0 bits/run (`sealed` — never runs a script)",
		"charge = 1 + ceil(log2(cardinality)) + 3 bits",
		"10ms, 100ms, 1s, 10s, 60s or 600s",
		"/query/out",
		"bounded-query --repo o/int --schema '{\"type\":\"boolean\"}'",
	} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "remaining:")
}
