package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLintDefaultIsClean(t *testing.T) {
	assert.Empty(t, Lint(DefaultName, DefaultSource()))
}

func TestLintFindings(t *testing.T) {
	cases := []struct {
		name, rules string
		want        string
		sev         Severity
	}{
		{"unknown name", "allow frobnicate : does things", "5:7: error: unknown system call", SevError},
		{"duplicate", "allow read : reading\nallow read : again", "duplicate rule for read", SevError},
		{"dangerous allow", "allow mount : mounting things", "mount may never be allowed", SevError},
		{"sensitive without mark", "allow execve : run the interpreter", "dangerous allow: execve runs new programs", SevError},
		{"ioctl without condition", "allow ioctl +sensitive : terminals", "ioctl must be restricted by an argument condition", SevError},
		{"missing reason", "allow read", "missing reason", SevError},
		{"empty reason", "allow read : read", "does not explain anything", SevError},
		{"needless mark", "allow read +sensitive : reading files", "not on the sensitive list", SevWarning},
		{"mark on deny", "kill ptrace +sensitive : other processes", "does not allow ptrace", SevWarning},
		{"nothing for arch", "allow arch_prctl : thread pointer", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := Lint("t.policy", []byte(header+tc.rules+"\n"))
			if tc.want == "" {
				assert.Empty(t, fs)
				return
			}
			require.NotEmpty(t, fs)
			var all []string
			for _, f := range fs {
				all = append(all, f.String())
			}
			joined := strings.Join(all, "\n")
			assert.Contains(t, joined, tc.want)
			assert.Contains(t, joined, string(tc.sev)+": ")
			assert.Equal(t, tc.sev == SevError, HasErrors(fs))
		})
	}
	fs := Lint("t.policy", []byte("version 1\ndefault kill : fatal calls\narch x86_64 aarch64\ngroup g : g\nallow arch_prctl : x86 only\n"))
	require.Len(t, fs, 1)
	assert.Contains(t, fs[0].Msg, "no rule applies on aarch64")
}
