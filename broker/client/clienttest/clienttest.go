// Package clienttest holds what the tests of client.ParseArgs and of the
// agent CLIs built on it (bounded-query, bounded-agent) share, so that the
// parser's contract is written once. Only tests import it.
package clienttest

import (
	"strings"

	"github.com/awf-project/awf/broker/client"
)

// RefusedArgs returns, by name, argument vectors that client.ParseArgs
// refuses; schema is a valid schema, set beside each fault so that the
// fault alone is what is refused. A new map each call: callers add their
// own CLI's cases to it.
func RefusedArgs(schema string) map[string][]string {
	return map[string][]string{
		"no args":          {},
		"only repo":        {"--repo", "o/r"},
		"only schema":      {"--schema", schema},
		"repo twice":       {"--repo", "o/r", "--repo", "o/r", "--schema", schema},
		"schema twice":     {"--repo", "o/r", "--schema", schema, "--schema", schema},
		"equals form":      {"--repo=o/r", "--schema", schema},
		"double dash":      {"--repo", "o/r", "--schema", schema, "--"},
		"short option":     {"-r", "o/r", "--schema", schema},
		"positional":       {"--repo", "o/r", "--schema", schema, "extra"},
		"unknown flag":     {"--repo", "o/r", "--schema", schema, "--verbose"},
		"missing value":    {"--repo", "o/r", "--schema"},
		"bad slug":         {"--repo", "https://github.com/o/r", "--schema", schema},
		"traversal":        {"--repo", "o/..", "--schema", schema},
		"dot name":         {"--repo", "o/.", "--schema", schema},
		"multiline slug":   {"--repo", "o/r\nx", "--schema", schema},
		"empty schema":     {"--repo", "o/r", "--schema", ""},
		"schema too large": {"--repo", "o/r", "--schema", strings.Repeat(" ", client.MaxSchemaBytes+1)},
		"help":             {"--help"},
	}
}
