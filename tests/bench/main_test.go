package bench

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
)

// TestMain runs the side-by-side suite instead of the tests when
// AWF_BENCH_SUITE=1, so that "go test ./..." (make test) only checks the
// report renderer.
func TestMain(m *testing.M) {
	if os.Getenv("AWF_BENCH_SUITE") == "1" {
		os.Exit(runSuite())
	}
	os.Exit(m.Run())
}

// randomID returns 32 random hex digits: a run id no other run uses.
func randomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
