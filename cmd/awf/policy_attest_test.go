package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyAttestCLI checks the command's verdicts and exit codes; the
// filtered cases are proven in policy's TestAttest and, on a real sandbox,
// in isolate/direct's TestAttestSandbox.
func TestPolicyAttestCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A grandchild: attest refuses the caller's own children.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `/usr/bin/python3 -c "import os, sys; print(os.getpid(), flush=True); sys.stdin.read()"; true`)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	pid := strings.TrimSpace(line)
	pidN, err := strconv.Atoi(pid)
	require.NoError(t, err)

	rc, out, errOut := runAWF(t, "", "policy", "attest", pid)
	assert.Equal(t, 1, rc, "an unfiltered process is a mismatch: %s%s", out, errOut)
	assert.Contains(t, out, "MISMATCH: pid "+pid)
	assert.Contains(t, out, "no seccomp filter")

	rc, out, _ = runAWF(t, "", "policy", "attest", pid, "@default", "--json")
	assert.Equal(t, 1, rc)
	var at struct {
		PID   int  `json:"pid"`
		Match bool `json:"match"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &at), out)
	assert.Equal(t, pidN, at.PID)
	assert.False(t, at.Match)

	for _, bad := range [][]string{{"policy", "attest"}, {"policy", "attest", "nope"}, {"policy", "attest", "1", "a", "b"}} {
		rc, _, _ = runAWF(t, "", bad...)
		assert.Equal(t, 2, rc, "%v", bad)
	}
}
