package conformance

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate/workspace"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/staging"
)

// slugCheckers are every place a repository slug is accepted or refused:
// the protocol's rule, the config loader, the config's published JSON
// Schema, staging and the agent CLI's argument parser. R39 says they agree.
func slugCheckers(t *testing.T) map[string]func(string) bool {
	patterns := configSlugPatterns(t)
	return map[string]func(string) bool{
		"proto":         func(s string) bool { return proto.ValidateRepoSlug(s) == nil },
		"broker/config": config.ValidSlug,
		"config schema": func(s string) bool {
			for _, p := range patterns {
				if !p.MatchString(s) {
					return false
				}
			}
			return true
		},
		"staging": func(s string) bool { return staging.ValidateSlug(s) == nil },
		"broker/client": func(s string) bool {
			_, err := client.ParseArgs([]string{"--repo", s, "--schema", `{"type":"boolean"}`})
			return err == nil
		},
	}
}

// configSlugPatterns reads the slug definition's patterns out of the
// config's JSON Schema (they are written in the RE2 subset).
func configSlugPatterns(t *testing.T) []*regexp.Regexp {
	var doc struct {
		Defs map[string]struct {
			AllOf []struct {
				Pattern string `json:"pattern"`
			} `json:"allOf"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(config.Schema(), &doc))
	def, ok := doc.Defs["slug"]
	require.True(t, ok, "the config schema has no slug definition")
	var out []*regexp.Regexp
	for _, a := range def.AllOf {
		out = append(out, regexp.MustCompile(a.Pattern))
	}
	require.NotEmpty(t, out)
	return out
}

// TestSlugCheckersAgree runs every R39 vector and the slugs that once split
// the checkers through all of them: each must give the vector's verdict.
func TestSlugCheckersAgree(t *testing.T) {
	cases := map[string]bool{
		"owner-/repo": false, // passed the config loader, failed in staging
		"o/a..b":      false, // passed staging only
		"o--x/r":      false,
		" o/r":        false, // staging used to trim
		"o/r ":        false,
		"o/.":         false,
		"o-x/r.git":   true,
		"O/.github":   true,
		strings.Repeat("o", 39) + "/" + strings.Repeat("n", 100): true,
	}
	_, vectors := load(t, "request.jsonl")
	for _, v := range vectors {
		if v.str(t, "kind") == "repo" {
			cases[v.str(t, "input")] = v.boolean(t, "ok")
		}
	}
	require.Greater(t, len(cases), 40)
	checkers := slugCheckers(t)
	for s, want := range cases {
		for name, ok := range checkers {
			assert.Equal(t, want, ok(s), "%s on %q", name, s)
		}
	}
}

// TestRunIDRule checks that the broker's run ids (proto's rule) are ids
// every sandbox backend accepts (workspace.ValidID), and that the rule
// refuses what is not 32 lower-case hex digits.
func TestRunIDRule(t *testing.T) {
	for range 200 {
		id := proto.NewRunID()
		require.NoError(t, proto.ValidateRunID(id))
		require.NoError(t, workspace.ValidID("run", id))
	}
	for _, bad := range []string{"", strings.Repeat("a", 31), strings.Repeat("a", 33), strings.Repeat("A", 32),
		strings.Repeat("g", 32), strings.Repeat("a", 31) + "\n", "../" + strings.Repeat("a", 29)} {
		assert.Error(t, proto.ValidateRunID(bad), "%q", bad)
	}
}
