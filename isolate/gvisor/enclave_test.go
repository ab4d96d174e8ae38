package gvisor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestEnclaveLoopAnswers runs the real loop in a real enclave on gvisor
// under agent-loop.policy, as backendSandbox runs gvisor enclaves
// (isolatetest.CheckEnclaveLoop). AWF_TEST_RUNSC_DEBUG=DIR adds runsc's
// --debug and --strace, with the Sentry's logs in DIR, to see the loop's
// system calls and any seccomp kill ("killed by seccomp").
func TestEnclaveLoopAnswers(t *testing.T) {
	r := newTestRuntime(t)
	r.debugArgs = debugArgsFromEnv(t)
	isolatetest.CheckEnclaveLoop(t, r.runID, r.RunEnclave)
}

// debugArgsFromEnv returns runsc's debug flags when AWF_TEST_RUNSC_DEBUG
// names a directory, else none: the Sentry's strace is for a developer
// chasing a sandbox's system calls, never for production runs.
func debugArgsFromEnv(t *testing.T) []string {
	d := os.Getenv("AWF_TEST_RUNSC_DEBUG")
	if d == "" {
		return nil
	}
	t.Logf("runsc debug logs in %s", d)
	return []string{"--debug", "--debug-log=" + filepath.Clean(d) + "/", "--strace"}
}
