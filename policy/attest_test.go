package policy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// attestHelperEnv makes the test binary attest the pid it names against the
// policy file in attestPolicyEnv and print the JSON: the attesting process
// must not be the attested one's parent.
const (
	attestHelperEnv = "AWF_POLICY_TEST_ATTEST_PID"
	attestPolicyEnv = "AWF_POLICY_TEST_ATTEST_POLICY"
)

func attestHelper(pidArg string) int {
	pid, err := strconv.Atoi(pidArg)
	if err == nil {
		var p *Policy
		if p, err = Load(os.Getenv(attestPolicyEnv)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var at *Attestation
			if at, err = Attest(ctx, pid, p, ""); err == nil {
				err = json.NewEncoder(os.Stdout).Encode(at)
			}
			cancel()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stdout, "ERR", err)
		return 2
	}
	return 0
}

// attestFrom attests pid against the policy file from a helper process and
// returns the attestation or the helper's error.
func attestFrom(t *testing.T, ctx context.Context, pid int, file string) (*Attestation, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = []string{attestHelperEnv + "=" + strconv.Itoa(pid), attestPolicyEnv + "=" + file}
	out, err := cmd.Output()
	if msg, ok := strings.CutPrefix(string(out), "ERR "); ok {
		return nil, errors.New(strings.TrimSpace(msg))
	}
	require.NoError(t, err, "attest helper: %s", out)
	var at Attestation
	require.NoError(t, json.Unmarshal(out, &at), "%s", out)
	return &at, nil
}

// startReady starts cmd, waits for its first line and returns its pid; the
// process is ended (stdin closed, then killed) and reaped at cleanup.
func startReady(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	stdin, stdout, errb := startPiped(t, cmd)
	t.Cleanup(func() {
		_ = stdin.Close()
		_, _ = io.Copy(io.Discard, stdout)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "child never got ready; stderr: %s", errb.String())
	require.NotEmpty(t, strings.TrimSpace(line))
	return cmd.Process.Pid
}

// filteredChild re-executes the test binary in mode with extra environment.
func filteredChild(t *testing.T, ctx context.Context, mode string, env ...string) int {
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append([]string{childModeEnv + "=" + mode}, env...)
	return startReady(t, cmd)
}

// TestAttest attests live processes: the compiled filter loaded by runc's
// code and by a raw prctl (match), the same decisions in another program
// form (match), another policy, a process without a filter and a process
// with one filtered thread among unfiltered ones (mismatch).
func TestAttest(t *testing.T) {
	mine := filepath.Join(t.TempDir(), "python3.policy")
	require.NoError(t, os.WriteFile(mine, DefaultSource(), 0o600))
	other := filepath.Join(t.TempDir(), "other.policy")
	src := strings.Replace(string(DefaultSource()), "allow uname ", "errno EPERM uname ", 1)
	require.NotEqual(t, string(DefaultSource()), src)
	require.NoError(t, os.WriteFile(other, []byte(src), 0o600))
	_, err := Load(other)
	require.NoError(t, err, "the other policy must be a valid policy")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name  string
		start func(t *testing.T) int
		match bool
		how   string
		diff  string
	}{
		{"runc loader", func(t *testing.T) int { return filteredChild(t, ctx, "exechold") }, true, AttestRuncStub, ""},
		{"raw program", func(t *testing.T) int { return filteredChild(t, ctx, "exechold", childLoaderEnv+"=raw") }, true, AttestIdentical, ""},
		{"linear program", func(t *testing.T) int { return filteredChild(t, ctx, "exechold", childLoaderEnv+"=linear") }, true, AttestDecisions, ""},
		{"other policy", func(t *testing.T) int { return filteredChild(t, ctx, "exechold", childPolicyEnv+"="+other) }, false, AttestMismatch, " uname (nr "},
		{"no filter", func(t *testing.T) int {
			return startReady(t, exec.CommandContext(ctx, debianPython, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"))
		}, false, AttestMismatch, "no seccomp filter"},
		{"one thread filtered", func(t *testing.T) int { return filteredChild(t, ctx, "hold") }, false, "", "no seccomp filter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pid := tc.start(t)
			at, err := attestFrom(t, ctx, pid, mine)
			require.NoError(t, err)
			assert.Equal(t, tc.match, at.Match, "%s", at.Verdict)
			require.NotEmpty(t, at.Threads)
			if tc.match {
				assert.True(t, strings.HasPrefix(at.Verdict, "MATCH: "), at.Verdict)
			} else {
				assert.True(t, strings.HasPrefix(at.Verdict, "MISMATCH: "), at.Verdict)
			}
			var all []string
			for _, th := range at.Threads {
				if tc.how != "" {
					assert.Equal(t, tc.how, th.How, "thread %d: %v", th.TID, th.Diffs)
				}
				all = append(all, th.Diffs...)
			}
			if tc.diff != "" {
				assert.Contains(t, strings.Join(all, "\n"), tc.diff)
			}
			if tc.name == "one thread filtered" {
				hows := map[string]int{}
				for _, th := range at.Threads {
					hows[th.How]++
				}
				assert.Equal(t, 1, hows[AttestRuncStub], "exactly the locked thread carries the filter: %v", hows)
				assert.Positive(t, hows[AttestMismatch], "the Go runtime's other threads carry none")
			}
		})
	}
}

// TestAttestOwnChild is refused: the parent's wait would see the stops.
func TestAttestOwnChild(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pid := filteredChild(t, ctx, "exechold")
	_, err = Attest(ctx, pid, p, "")
	require.ErrorContains(t, err, "is its parent")
}

// TestAttestGoneProcess is an error, not a verdict.
func TestAttestGoneProcess(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	cmd := exec.Command("/bin/true")
	require.NoError(t, cmd.Run())
	_, err = Attest(context.Background(), cmd.Process.Pid, p, "")
	require.Error(t, err)
}
