package docker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
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
	pids := make(chan int, 1)
	done := make(chan isolate.Outcome, 1)
	go func() {
		done <- r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{
			InvocationID: "attest", Script: []byte("import time\ntime.sleep(20)\n"),
			OnStart: func(pid int) { pids <- pid },
		}})
	}()
	var pid int
	select {
	case pid = <-pids:
	case o := <-done:
		t.Fatalf("the job ended before it started: %s %s", o.Kind, o.Detail)
	}
	defer func() {
		cancel()
		<-done
	}()
	at, err := policy.Attest(ctx, pid, tpl.Policy, "")
	require.NoError(t, err)
	assert.True(t, at.Match, "%s", at.Verdict)
	for _, th := range at.Threads {
		assert.Contains(t, []string{policy.AttestDecisions, policy.AttestRuncStub}, th.How, "thread %d: %v", th.TID, th.Diffs)
	}
	t.Logf("%s", at.Verdict)
}
