package docker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/policy"
)

// TestAttestDockerSandbox attests a live Docker sandbox: the Engine's runc
// builds its own program from the profile, so the verdict is the same
// decisions in another form, on every thread. The job is the Engine's
// grandchild, not this process's child, so Attest runs here.
func TestAttestDockerSandbox(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pid, stop := isolatetest.StartJob(ctx, t, r, tpl, isolate.Job{InvocationID: "attest", Script: []byte("import time\ntime.sleep(20)\n")})
	defer stop()
	at, err := policy.Attest(ctx, pid, tpl.Policy, "")
	require.NoError(t, err)
	assert.True(t, at.Match, "%s", at.Verdict)
	for _, th := range at.Threads {
		assert.Contains(t, []string{policy.AttestDecisions, policy.AttestRuncStub}, th.How, "thread %d: %v", th.TID, th.Diffs)
	}
	t.Logf("%s", at.Verdict)
}
