package proto

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
)

// RunIDPattern is the shape of a broker run id: 16 random bytes in
// lower-case hex. The broker mints it, the seed map carries it, and the
// agent's cgroups and the watchdog match it. The sandbox backends accept
// any id isolate/workspace.ValidID allows, a superset (so that their tests
// and probes can name their own runs); every id of this shape passes there.
const RunIDPattern = `^[0-9a-f]{32}$`

var runIDShape = regexp.MustCompile(RunIDPattern)

// NewRunID returns a fresh run id: 16 bytes from crypto/rand in hex.
func NewRunID() string {
	var b [16]byte
	// crypto/rand.Read never fails on Linux (it panics instead).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidateRunID checks that s has RunIDPattern's shape.
func ValidateRunID(s string) error {
	if !runIDShape.MatchString(s) {
		return fmt.Errorf("run id %q: want 32 lower-case hex digits", s)
	}
	return nil
}
