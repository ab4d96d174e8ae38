package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker/agentloop"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/tests/fakeprovider"
	"github.com/awf-project/awf/tests/fakeprovider/proxied"
)

// loopWrapEnv makes the re-executed test binary chroot into the named
// directory, load agent-loop.policy as runc init does (no_new_privs, then
// seccomp.InitSeccomp) and exec the loop; init runs before TestMain.
const loopWrapEnv = "AWF_POLICY_TEST_LOOP_ROOT"

func init() {
	root := os.Getenv(loopWrapEnv)
	if root == "" {
		return
	}
	runtime.LockOSThread()
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "loop wrapper: %v\n", err)
		os.Exit(100)
	}
	p, err := policy.AgentLoop()
	if err != nil {
		fail(err)
	}
	cfg, err := p.Libcontainer()
	if err != nil {
		fail(err)
	}
	if err := unix.Chroot(root); err != nil {
		fail(err)
	}
	if err := unix.Chdir("/"); err != nil {
		fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(err)
	}
	if _, err := seccomp.InitSeccomp(cfg); err != nil {
		fail(err)
	}
	fail(syscall.Exec(agentloop.BinaryPath, []string{agentloop.BinaryPath}, []string{}))
}

// TestAgentLoopRunsUnderPolicy runs the real static loop (cmd/agent-loop,
// built as the Makefile builds it) under agent-loop.policy, chrooted into
// the enclave's layout, against the real API proxy in front of the
// scripted fake provider, for both profiles: every call it makes on the
// way (Go runtime start-up, openat2 into the seed, the proxy's TCP
// connection, the outputs) is one the policy allows, so it answers and
// exits 0 instead of dying with SIGSYS.
func TestAgentLoopRunsUnderPolicy(t *testing.T) {
	loop := staticLoop(t)

	for _, profile := range []string{agentloop.ProfileOpenAI, agentloop.ProfileAnthropic} {
		t.Run(profile, func(t *testing.T) {
			fake := fakeprovider.New(t,
				fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "net"}},
				fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "read_file", Args: map[string]any{"path": "net/retry.go"}},
				fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "search", Args: map[string]any{"pattern": "retry"}},
				fakeprovider.Turn{Kind: fakeprovider.Finish, Args: map[string]any{"result": map[string]any{"owner": "net"}}})
			endpoint, tok := proxied.Start(t, fake, "m", 4096, 8)

			root := enclaveRoot(t, loop, agentloop.Config{Profile: profile, Model: "m", Endpoint: endpoint, Capability: tok,
				MaxModelRequests: 8, MaxModelTokens: 4096}, "Who owns retries?",
				`{"type":"object","fields":{"owner":{"type":"enum","values":["net","store"]}}}`)
			in := func(p string) string { return filepath.Join(root, p) }

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0])
			cmd.Env = []string{loopWrapEnv + "=" + root}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			tr, _ := os.ReadFile(in(agentloop.TranscriptPath))
			require.False(t, ws.Signaled() && ws.Signal() == unix.SIGSYS, "the loop was killed by the filter; transcript: %s", tr)
			require.NoError(t, err, "stderr %q, transcript %s", stderr.String(), tr)
			res, err := os.ReadFile(in(agentloop.ResultPath))
			require.NoError(t, err)
			assert.Equal(t, `{"owner":"net"}`, string(res))
			assert.Contains(t, string(tr), "retry policy")
			assert.Equal(t, 4, fake.Count())
		})
	}
}
