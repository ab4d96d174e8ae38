package proto

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// modelNameShape is ValidModelName's rule as the pattern the config's JSON
// Schema states; the tests hold the two equal.
var modelNameShape = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

func TestValidModelName(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"openai", "gpt-4o-mini", true},
		{"dated", "claude-3-5-sonnet@20240620", true},
		{"path and tag", "org/model:v1.2+build_3", true},
		{"one character", "a", true},
		{"longest", strings.Repeat("m", MaxModelNameBytes), true},
		{"empty", "", false},
		{"too long", strings.Repeat("m", MaxModelNameBytes+1), false},
		{"leading dot", ".model", false},
		{"leading dash", "-model", false},
		{"space", "gpt 4", false},
		{"quote", `gpt"4`, false},
		{"newline", "gpt\n", false},
		{"non-ASCII", "gptö", false},
		{"NUL", "gpt\x00", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.ok, ValidModelName(tc.in))
			assert.Equal(t, modelNameShape.MatchString(tc.in), ValidModelName(tc.in), "the schema's pattern and the rule differ")
		})
	}
}

func TestAgentHeaderNamesIsAFreshSlice(t *testing.T) {
	a := AgentHeaderNames()
	a[0] = "changed"
	assert.Equal(t, []string{HeaderAgentVersion, HeaderRepo, HeaderSchema}, AgentHeaderNames())
}

// FuzzValidModelName holds the written-out rule equal to the pattern.
func FuzzValidModelName(f *testing.F) {
	for _, s := range []string{"gpt-4o-mini", "", "a", strings.Repeat("m", 129), "x\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidModelName(s), modelNameShape.MatchString(s); got != want {
			t.Fatalf("ValidModelName(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
