package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/awf-project/awf/proto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDispatch(t *testing.T) {
	cases := []struct {
		name string
		args []string
		rc   int
		out  string
		err  string
	}{
		{"no args", nil, 2, "", "usage: awf COMMAND"},
		{"help", []string{"--help"}, 0, "usage: awf COMMAND", ""},
		{"-h", []string{"-h"}, 0, "usage: awf COMMAND", ""},
		{"help word", []string{"help", "isolate", "run"}, 0, "usage: awf isolate run", ""},
		{"version", []string{"version"}, 0, "awf " + proto.Version() + "\n", ""},
		{"--version", []string{"--version"}, 0, "awf " + proto.Version() + "\n", ""},
		{"version with args", []string{"version", "x"}, 2, "", "usage: awf version"},
		{"unknown", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"unknown top flag", []string{"--frob"}, 2, "", `unknown flag "--frob"`},
		{"isolate without sub", []string{"isolate"}, 2, "", "usage: awf isolate"},
		{"isolate unknown sub", []string{"isolate", "nope"}, 2, "", `unknown subcommand "nope"`},
		{"isolate help", []string{"isolate", "--help"}, 0, "usage: awf isolate COMMAND", ""},
		{"config validate help", []string{"config", "validate", "--help"}, 0, "usage: awf config validate", ""},
		{"help after --", []string{"run", "--config", "/nonexistent.json", "--", "sh", "--help"}, 125, "", "/nonexistent.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, out, errOut := runAWF(t, "", tc.args...)
			assert.Equal(t, tc.rc, rc, "stdout %q stderr %q", out, errOut)
			if tc.out == "" {
				assert.Empty(t, out)
			} else {
				assert.Contains(t, out, tc.out)
			}
			if tc.err == "" {
				assert.Empty(t, errOut)
			} else {
				assert.Contains(t, errOut, tc.err)
			}
		})
	}
}

// leaves returns every runnable command of the tree the dispatcher uses, by
// its argument path, so that a new subcommand is covered without a new case.
func leaves(n *node, path []string) map[string]*node {
	out := map[string]*node{}
	for _, s := range n.subs {
		p := append(slices.Clone(path), s.name)
		if s.run != nil {
			out[strings.Join(p, " ")] = s
			continue
		}
		for k, v := range leaves(s, p) {
			out[k] = v
		}
	}
	return out
}

// TestCLIRules checks the shared rules on every command: help on stdout with
// exit 0, usage errors on stderr with exit 2, the flags it declares are the
// ones its help names, and each declared value flag accepts --flag=value.
func TestCLIRules(t *testing.T) {
	all := leaves(tree(), nil)
	require.Greater(t, len(all), 20, "the tree lost its commands")
	flagRE := regexp.MustCompile(`(?:^|[\s\[|])--([a-z][a-z0-9-]*)`)
	for path, n := range all {
		args := strings.Fields(path)
		t.Run(path, func(t *testing.T) {
			for _, h := range []string{"--help", "-h"} {
				rc, out, errOut := runAWF(t, "", append(slices.Clone(args), h)...)
				assert.Equal(t, 0, rc, h)
				assert.Contains(t, out, "usage: awf "+args[0], h)
				assert.Empty(t, errOut, h)
				// Help wins wherever it stands among the command's own flags.
				rc, out, _ = runAWF(t, "", append(append(slices.Clone(args), "--no-such-flag"), h)...)
				assert.Equal(t, 0, rc, "%s after another flag", h)
				assert.NotEmpty(t, out)
			}
			rc, out, errOut := runAWF(t, "", append(slices.Clone(args), "--no-such-flag")...)
			assert.Equal(t, 2, rc, "an unknown flag is a usage error")
			assert.Empty(t, out, "usage errors go to stderr only")
			assert.NotEmpty(t, errOut)

			// The declared flags are exactly the ones the help text names
			// (group help texts name their siblings' flags too).
			named := map[string]bool{}
			for _, m := range flagRE.FindAllStringSubmatch(n.help("awf "+path), -1) {
				named[m[1]] = true
			}
			for _, f := range append(slices.Clone(n.values), n.bools...) {
				assert.True(t, named[f], "--%s is declared but its help does not name it", f)
			}
			for _, f := range n.values {
				split := n.splitEquals([]string{"--" + f + "=a=b", "--", "--" + f + "=c"})
				assert.Equal(t, []string{"--" + f, "a=b", "--", "--" + f + "=c"}, split)
			}
		})
	}
	// Every flag a leaf's own help names is declared (group help texts are
	// shared, so this is checked for the leaves with their own text).
	for path, n := range all {
		if n.usage == policyUsage || n.usage == schemaUsage || n.usage == rootfsUsage {
			continue
		}
		declared := append(append(slices.Clone(n.values), n.bools...), "help", "version", "agent-shim", "serve", "agent-probes")
		for _, m := range flagRE.FindAllStringSubmatch(n.usage, -1) {
			assert.Contains(t, declared, m[1], "%s: its help names --%s, which the tree does not declare", path, m[1])
		}
	}
}

// TestCLIGroupRules checks every group of the tree, the top level included:
// help on stdout with exit 0, a missing or unknown subcommand on stderr with
// exit 2, and a help text that names every subcommand.
func TestCLIGroupRules(t *testing.T) {
	var walk func(n *node, path []string)
	seen := 0
	walk = func(n *node, path []string) {
		if n.run != nil {
			return
		}
		seen++
		t.Run("group "+strings.Join(append([]string{"awf"}, path...), " "), func(t *testing.T) {
			for _, h := range []string{"--help", "-h"} {
				rc, out, errOut := runAWF(t, "", append(slices.Clone(path), h)...)
				assert.Equal(t, 0, rc, h)
				assert.Contains(t, out, "usage: awf", h)
				assert.Empty(t, errOut, h)
				for _, s := range n.subs {
					assert.Contains(t, out, s.name, "%s: the help names every subcommand", h)
				}
			}
			for _, bad := range [][]string{nil, {"no-such-subcommand"}, {"--no-such-flag"}} {
				rc, out, errOut := runAWF(t, "", append(slices.Clone(path), bad...)...)
				assert.Equal(t, 2, rc, "%v", bad)
				assert.Empty(t, out, "%v", bad)
				assert.Contains(t, errOut, "usage: awf", "%v", bad)
			}
		})
		for _, s := range n.subs {
			walk(s, append(slices.Clone(path), s.name))
		}
	}
	walk(tree(), nil)
	assert.GreaterOrEqual(t, seen, 7)
}

// TestFlagEqualsValue runs real commands with --flag=value and --flag value.
func TestFlagEqualsValue(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"agent":{"user":"nobody"}}`), 0o600))
	for _, tc := range [][]string{
		{"config", "validate", "--config=" + cfg},
		{"config", "validate", "--config", cfg},
		{"config", "validate", cfg},
		{"policy", "table", "@default", "--arch=x86_64"},
		{"policy", "table", "@default", "--arch", "x86_64"},
		{"schema", "validate", `--schema={"type":"boolean"}`},
		{"schema", "validate", "--schema", `{"type":"boolean"}`},
	} {
		t.Run(strings.Join(tc, " "), func(t *testing.T) {
			rc, out, errOut := runAWF(t, "true", tc...)
			assert.Equal(t, 0, rc, "stdout %q stderr %q", out, errOut)
		})
	}
}

func TestCompletion(t *testing.T) {
	rc, script, _ := runAWF(t, "", "completion", "bash")
	require.Equal(t, 0, rc)
	p := filepath.Join(t.TempDir(), "awf.bash")
	require.NoError(t, os.WriteFile(p, []byte(script), 0o600))
	complete := func(words ...string) string {
		t.Helper()
		sh := fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _awf; echo "${COMPREPLY[*]}"`,
			p, strings.Join(quoteAll(words), " "), len(words)-1)
		out, err := exec.Command("bash", "-c", sh).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	assert.Equal(t, "run verify matrix --help", complete("awf", "isolate", ""))
	assert.Contains(t, complete("awf", ""), "audit")
	assert.Contains(t, complete("awf", "isolate", "verify", "--docker"), "--docker-socket")
	assert.Contains(t, complete("awf", "audit", "summary", "--f"), "--format")

	rc, z, _ := runAWF(t, "", "completion", "zsh")
	require.Equal(t, 0, rc)
	assert.Contains(t, z, "bashcompinit")
	rc, _, errOut := runAWF(t, "", "completion", "fish")
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, "usage: awf completion")
}

func quoteAll(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = fmt.Sprintf("%q", w)
	}
	return out
}

func TestPolicyCommands(t *testing.T) {
	rc, out, errOut := runAWF(t, "", "policy", "lint", "@default")
	require.Equal(t, 0, rc, "lint of the default policy must be clean: %s%s", out, errOut)

	rc, out, _ = runAWF(t, "", "policy", "table", "@default")
	require.Equal(t, 0, rc)
	assert.Regexp(t, `(?m)^x86_64\s+read\s.*allow`, out)
	assert.Regexp(t, `(?m)^x86_64\s+ptrace\s.*kill`, out)

	// A policy that allows one more call shows up as exactly that in the diff.
	src, err := os.ReadFile("../../policy/python3.policy")
	require.NoError(t, err)
	weaker := strings.Replace(string(src), "allow statx", "kill statx", 1)
	require.NotEqual(t, string(src), weaker, "the default policy should allow statx")
	p := filepath.Join(t.TempDir(), "weaker.policy")
	require.NoError(t, os.WriteFile(p, []byte(weaker), 0o600))
	rc, out, _ = runAWF(t, "", "policy", "diff", "@default", p)
	assert.Equal(t, 1, rc, "a differing policy makes diff exit 1")
	assert.Contains(t, out, "statx")
}
