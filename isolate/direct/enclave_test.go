package direct_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestEnclaveLoopAnswers runs the real loop in a real enclave on direct
// (isolatetest.CheckEnclaveLoop).
func TestEnclaveLoopAnswers(t *testing.T) {
	runID := newRunID()
	rt, err := direct.Open(isolate.HostConfig{RunID: runID, StateDir: filepath.Join(t.TempDir(), "state")})
	require.NoError(t, err)
	defer func() { assert.NoError(t, rt.Close()) }()
	isolatetest.CheckEnclaveLoop(t, runID, rt.RunEnclave)
}
