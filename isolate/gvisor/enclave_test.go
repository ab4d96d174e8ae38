package gvisor

import (
	"testing"

	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestEnclaveLoopAnswers runs the real loop in a real enclave on gvisor
// (isolatetest.CheckEnclaveLoop).
func TestEnclaveLoopAnswers(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.CheckEnclaveLoop(t, r.runID, r.RunEnclave)
}
