package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExitStatusAndDisabled: awf run exits with the command's status; with
// boundedQueries disabled it stages nothing, sets nothing and just runs it.
func TestExitStatusAndDisabled(t *testing.T) {
	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "public")}})
	r := awfRun(t, cfg, agentScript(t, "exit 7\n"))
	assert.Equal(t, 7, r.code, r.stderr)

	p := filepath.Join(t.TempDir(), "off.json")
	raw, _ := json.Marshal(map[string]any{"boundedQueries": map[string]any{"enabled": false}, "agent": map[string]any{"user": agentUser}})
	require.NoError(t, os.WriteFile(p, raw, 0o600))
	r = awfRun(t, p, agentScript(t, "echo \"socket=[$AWF_BOUNDED_QUERY_SOCKET] uid=$(id -u)\"; exit 3\n"))
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Contains(t, r.stdout, "socket=[] uid=")
	assert.NotContains(t, r.stdout, "uid=0")
	assert.NotContains(t, r.stderr, "staging")
}

// TestSignalTeardown: SIGTERM to awf run stops the agent, the broker and
// the sandboxes, removes seeds and roots, and leaves no process behind.
func TestSignalTeardown(t *testing.T) {
	before := runDirs()
	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "public")}})
	script := agentScript(t, "echo started; sleep 300\n")
	cmd := exec.Command(awfBin, "run", "--config", cfg, "--", "/bin/sh", script)
	cmd.Dir = "/"
	cmd.Env = baseEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "started") }, 3*time.Minute, 50*time.Millisecond, errb.String())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("awf run did not end after SIGTERM")
	}
	removeArchive(t, errb.String())
	assert.Equal(t, 128+int(syscall.SIGTERM), cmd.ProcessState.ExitCode(), errb.String())
	assertNoNewRunDirs(t, before)
	// No agent or broker process survives.
	assert.Empty(t, hostProcesses(script), "agent process survived")
}

// TestPreflightFailures: each fail-closed check stops awf run before anything
// is staged, with an operator-readable reason, and the command never runs.
func TestPreflightFailures(t *testing.T) {
	wrongDigest := map[string]any{"path": rootfsDir, "digest": "sha256:" + strings.Repeat("0", 64)}
	cases := []struct {
		name string
		b    bq
		user any
		env  []string
		want string
	}{
		{"root agent", bq{PrivateRepos: []repo{local("demo/app", "public")}}, "root", nil, "refusing to run the agent as root"},
		{"no token for GitHub", bq{PrivateRepos: []repo{{Repo: "demo/app", Sensitivity: "public"}}}, nil, nil, "no staging credential"},
		{"rootfs digest mismatch", bq{PrivateRepos: []repo{local("demo/app", "public")}, RootFS: wrongDigest}, nil, nil, "digest"},
		{"sbx blocked", bq{PrivateRepos: []repo{local("demo/app", "public")}, Runtime: "sbx"}, nil, nil, "runtime sbx"},
		{"docker socket missing", bq{PrivateRepos: []repo{local("demo/app", "public")}, Runtime: "docker", DockerSocket: "/nonexistent/docker.sock"}, nil, nil, "Docker host must be a local Unix socket"},
		{"missing source", bq{PrivateRepos: []repo{{Repo: "demo/app", Sensitivity: "public", Source: "/nonexistent/repo"}}}, nil, nil, "staging"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, tc.b)
			before := runDirs()
			if tc.user != nil {
				raw, _ := os.ReadFile(cfg)
				var doc map[string]any
				require.NoError(t, json.Unmarshal(raw, &doc))
				doc["agent"] = map[string]any{"user": tc.user}
				raw, _ = json.Marshal(doc)
				require.NoError(t, os.WriteFile(cfg, raw, 0o600))
			}
			r := awfRun(t, cfg, agentScript(t, "echo RAN\n"), tc.env...)
			assert.Equal(t, 125, r.code)
			assert.Contains(t, r.stderr, tc.want)
			assert.NotContains(t, r.stdout, "RAN")
			assertNoNewRunDirs(t, before)
		})
	}
	// A config error is reported with its path.
	p := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"boundedQueries":{"enabled":true,"timeout":900}}`), 0o600))
	r := awfRun(t, p, agentScript(t, "echo RAN\n"))
	assert.Equal(t, 125, r.code)
	assert.Contains(t, r.stderr, "boundedQueries.timeout")
}
