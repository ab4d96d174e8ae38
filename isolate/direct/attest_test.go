package direct_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/policy"
)

// attestHelperEnv makes the test binary attest the pid it names (against
// the policy file in attestPolicyEnv) and print the attestation as JSON:
// the attesting process must not be the sandbox's parent (policy.Attest).
const (
	attestHelperEnv = "AWF_DIRECT_TEST_ATTEST_PID"
	attestPolicyEnv = "AWF_DIRECT_TEST_ATTEST_POLICY"
)

func init() {
	v := os.Getenv(attestHelperEnv)
	if v == "" {
		return
	}
	pid, err := strconv.Atoi(v)
	if err == nil {
		var pol *policy.Policy
		if pol, err = policy.Load(os.Getenv(attestPolicyEnv)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var at *policy.Attestation
			if at, err = policy.Attest(ctx, pid, pol, ""); err == nil {
				err = json.NewEncoder(os.Stdout).Encode(at)
			}
			cancel()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "attest helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// attestFrom attests pid against the policy file from a helper process.
func attestFrom(t *testing.T, ctx context.Context, pid int, file string) *policy.Attestation {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), attestHelperEnv+"="+strconv.Itoa(pid), attestPolicyEnv+"="+file)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "attest helper")
	var at policy.Attestation
	require.NoError(t, json.Unmarshal(out, &at), "%s", out)
	return &at
}

// TestAttestSandbox attests a real direct sandbox while its job runs, with
// threads: against the policy it was started with (a match, on every
// thread, the compiled program behind runc's stub) and against another
// policy (a mismatch that names the changed call).
func TestAttestSandbox(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	mine := filepath.Join(t.TempDir(), "python3.policy")
	require.NoError(t, os.WriteFile(mine, policy.DefaultSource(), 0o600))
	other := filepath.Join(t.TempDir(), "other.policy")
	src := strings.Replace(string(policy.DefaultSource()), "allow uname ", "errno EPERM uname ", 1)
	require.NotEqual(t, string(policy.DefaultSource()), src)
	require.NoError(t, os.WriteFile(other, []byte(src), 0o600))
	_, err := policy.Load(other)
	require.NoError(t, err)

	const threads = 2
	// The threads sleep until the test cancels the job (or the template's
	// wall limit ends it): a fixed short sleep let them exit before a slow
	// host (the emulated cgroup v2 VM) had attested every one.
	script := fmt.Sprintf("import threading, time\nfor _ in range(%d):\n    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\ntime.sleep(3600)\n", threads-1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pid, stop := isolatetest.StartJob(ctx, t, e.rt, tpl, isolate.Job{InvocationID: "attest", Script: []byte(script)})
	// End the job now rather than after its sleep.
	defer stop()
	// Wait for the script's threads, so that every one is attested. Before
	// it execs python3 the pid is libcontainer's init, whose own threads
	// would satisfy the count early: wait for python3 first. The name is
	// read before the task list: read after it, a list taken just before
	// the exec (init's threads) passed with the name taken just after.
	for {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		require.NoError(t, err)
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		require.NoError(t, err)
		if strings.TrimSpace(string(comm)) == "python3" && len(ents) >= threads {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the job never started its threads")
		case <-time.After(20 * time.Millisecond):
		}
	}

	// From this process, the sandbox's parent, attesting is refused.
	_, err = policy.Attest(ctx, pid, tpl.Policy, "")
	require.ErrorContains(t, err, "is its parent")

	at := attestFrom(t, ctx, pid, mine)
	assert.True(t, at.Match, "%s", at.Verdict)
	assert.GreaterOrEqual(t, len(at.Threads), threads)
	for _, th := range at.Threads {
		assert.Equal(t, policy.AttestRuncStub, th.How, "thread %d: %v", th.TID, th.Diffs)
		assert.True(t, th.NoNewPrivs)
	}
	t.Logf("%s", at.Verdict)

	at = attestFrom(t, ctx, pid, other)
	assert.False(t, at.Match, "%s", at.Verdict)
	assert.Contains(t, at.Verdict, " uname (nr ")
}
