package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDispatch(t *testing.T) {
	cases := []struct {
		name string
		args []string
		rc   int
		err  string
	}{
		{"no args", nil, 2, "usage: awf COMMAND"},
		{"help", []string{"--help"}, 2, "usage: awf COMMAND"},
		{"unknown", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"isolate without sub", []string{"isolate"}, 2, "usage: awf isolate"},
		{"isolate unknown sub", []string{"isolate", "nope"}, 2, `unknown subcommand "nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, errOut := runAWF(t, "", tc.args...)
			assert.Equal(t, tc.rc, rc)
			assert.Contains(t, errOut, tc.err)
		})
	}
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
