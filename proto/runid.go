package proto

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// RunIDPattern is the shape of a broker run id: 16 random bytes in
// lower-case hex. The broker mints it, the seed map carries it, and the
// agent's cgroups and the watchdog match it. The sandbox backends accept
// any id isolate/workspace.ValidID allows, a superset (so that their tests
// and probes can name their own runs); every id of this shape passes there.
// ValidateRunID is this rule written out; a fuzz test holds the two equal.
const RunIDPattern = `^[0-9a-f]{32}$`

// runIDLen is the length RunIDPattern fixes: 16 bytes in hex.
const runIDLen = 32

// NewRunID returns a fresh run id: 16 bytes from crypto/rand in hex.
func NewRunID() string {
	var b [runIDLen / 2]byte
	// crypto/rand.Read never fails on Linux (it panics instead).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidateRunID checks that s has RunIDPattern's shape. It is written out
// rather than compiled from the pattern because the agent CLIs link proto:
// a package-level regexp is compiled at every start of theirs.
func ValidateRunID(s string) error {
	ok := len(s) == runIDLen
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("run id %q: want 32 lower-case hex digits", s)
	}
	return nil
}
