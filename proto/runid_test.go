package proto

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidateRunID(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{"minted", NewRunID(), true},
		{"lower hex", "0123456789abcdef0123456789abcdef", true},
		{"upper hex", "0123456789ABCDEF0123456789abcdef", false},
		{"short", "0123456789abcdef0123456789abcde", false},
		{"long", "0123456789abcdef0123456789abcdef0", false},
		{"empty", "", false},
		{"not hex", "0123456789abcdef0123456789abcdeg", false},
		{"trailing newline", "0123456789abcdef0123456789abcde\n", false},
		{"multibyte", "0123456789abcdef0123456789abcdé", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateRunID(tc.id)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// FuzzValidateRunID holds the written-out validator equal to RunIDPattern,
// which the documentation and the broker's own readers quote.
func FuzzValidateRunID(f *testing.F) {
	shape := regexp.MustCompile(RunIDPattern)
	for _, s := range []string{NewRunID(), "", "0123456789abcdef0123456789abcdeF", "0123456789abcdef0123456789abcdef\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidateRunID(s) == nil, shape.MatchString(s); got != want {
			t.Fatalf("ValidateRunID(%q) ok=%v, RunIDPattern matches=%v", s, got, want)
		}
	})
}
