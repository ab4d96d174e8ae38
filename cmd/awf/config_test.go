package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets a test run this binary as awf itself (AWF_TEST_AS_AWF=1),
// for commands such as awf run that change their own process.
func TestMain(m *testing.M) {
	// awf re-executes itself for its hidden modes (the watchdog, the broker,
	// the agent shim) with an environment of its own, which drops
	// AWF_TEST_AS_AWF. Such a child is awf too: a test binary run with
	// anything but go test's own -test.* flags must never run the tests,
	// or each child would start the whole suite again.
	if os.Getenv("AWF_TEST_AS_AWF") == "1" || (len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.")) {
		os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// awfBinary copies the test binary into a directory with a bounded-query
// file next to it, as make build lays them out.
func awfBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	src, err := os.Open(self)
	require.NoError(t, err)
	defer src.Close()
	exe := filepath.Join(dir, "awf")
	dst, err := os.OpenFile(exe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bounded-query"), []byte("#!/bin/sh\n"), 0o755))
	return exe
}

// runBinary runs the awf binary exe (from awfBinary) in dir, with env after a
// minimal environment of its own and stdin as standard input, and returns its
// exit status and its standard output and error together.
func runBinary(t *testing.T, exe, dir string, env []string, stdin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = append([]string{"AWF_TEST_AS_AWF=1", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, env...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}

// TestConfigValidateAgreesWithRun: for every configuration awf run refuses
// before it runs the agent, awf config validate --preflight refuses it too
// and names the JSON path (or variable) at fault.
func TestConfigValidateAgreesWithRun(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "awf run's checks need root")
	exe := awfBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	repo := t.TempDir()
	bq := func(extra string) string {
		return `{"agent":{"user":"nobody"},"boundedQueries":{"enabled":true,"privateRepos":[` + extra + `]}}`
	}
	local := `{"repo":"o/r","sensitivity":"internal","source":"` + repo + `"}`
	withRuntime := func(rt, more string) string {
		return `{"agent":{"user":"nobody"},"boundedQueries":{"enabled":true,"runtime":"` + rt + `"` + more + `,"privateRepos":[` + local + `]}}`
	}
	cases := []struct {
		name, cfg string
		env       []string
		where     string
	}{
		{"syntax error", "{\n \"agent\": {,}}", nil, "cfg.json:2:12"},
		{"unknown key", `{"agent":{"user":"nobody"},"nope":1}`, nil, "nope"},
		{"bad sensitivity", bq(`{"repo":"o/r","sensitivity":"secret","source":"` + repo + `"}`), nil, "boundedQueries.privateRepos[0].sensitivity"},
		{"relative source", bq(`{"repo":"o/r","sensitivity":"internal","source":"rel/dir"}`), nil, "boundedQueries.privateRepos[0].source"},
		{"agent root", `{"agent":{"user":"root"},"boundedQueries":{"enabled":true,"privateRepos":[` + local + `]}}`, nil, "agent.user: agent user: refusing to run the agent as root"},
		{"agent unknown", `{"agent":{"user":"no-such-user-awf"},"boundedQueries":{"enabled":true,"privateRepos":[` + local + `]}}`, nil, "agent.user"},
		{"agent unset", `{"boundedQueries":{"enabled":true,"privateRepos":[` + local + `]}}`, nil, "agent.user"},
		{"agent from bad SUDO_UID", `{"boundedQueries":{"enabled":true,"privateRepos":[` + local + `]}}`, []string{"SUDO_UID=x", "SUDO_GID=y"}, "agent.user"},
		{"local source missing", bq(`{"repo":"o/r","sensitivity":"internal","source":"` + dir + `/missing"}`), nil, "boundedQueries.privateRepos[0].source"},
		{"local source a file", bq(`{"repo":"o/r","sensitivity":"internal","source":"` + file + `"}`), nil, "boundedQueries.privateRepos[0].source"},
		{"remote without credential", bq(local + `,{"repo":"o/remote","sensitivity":"internal"}`), nil, "boundedQueries.privateRepos[1].source"},
		{"bad GITHUB_SERVER_URL", bq(local), []string{"GITHUB_SERVER_URL=http://example.invalid"}, "env GITHUB_SERVER_URL"},
		{"docker over tcp", withRuntime("docker", ""), []string{"DOCKER_HOST=tcp://127.0.0.1:2375"}, "env DOCKER_HOST"},
		{"docker socket not a socket", withRuntime("docker", `,"dockerSocket":"`+file+`"`), nil, "boundedQueries.dockerSocket"},
		{"docker DOCKER_HOST not a socket", withRuntime("docker", ""), []string{"DOCKER_HOST=unix://" + file}, "env DOCKER_HOST"},
		{"runsc missing", withRuntime("gvisor", ""), []string{"PATH=" + dir}, "boundedQueries.runtime"},
		{"runsc path missing", withRuntime("gvisor", `,"runscPath":"`+dir+`/runsc"`), nil, "boundedQueries.runscPath"},
		{"rootfs missing", withRuntime("direct", `,"rootfs":{"path":"`+dir+`/rootfs","digest":"sha256:`+strings.Repeat("0", 64)+`"}`), nil, "boundedQueries.rootfs.path"},
		{"rootfs without digest", withRuntime("direct", `,"rootfs":{"path":"`+dir+`"}`), nil, "boundedQueries.rootfs"},
		{"unknown runtime", withRuntime("kvm", ""), nil, "boundedQueries.runtime"},
		{"timeout zero", withRuntime("direct", `,"timeout":0`), nil, "boundedQueries.timeout"},
		{"timeout too long", withRuntime("direct", `,"timeout":541`), nil, "boundedQueries.timeout"},
		{"memory too small", withRuntime("direct", `,"memoryLimit":"1m"`), nil, "boundedQueries.memoryLimit"},
		{"interpreter", withRuntime("direct", `,"interpreter":"python2"`), nil, "boundedQueries.interpreter"},
		{"maxInvocations zero", withRuntime("direct", `,"maxInvocations":0`), nil, "boundedQueries.maxInvocations"},
		{"relative dockerSocket", withRuntime("docker", `,"dockerSocket":"docker.sock"`), nil, "boundedQueries.dockerSocket"},
		{"no repositories", `{"agent":{"user":"nobody"},"boundedQueries":{"enabled":true,"privateRepos":[]}}`, nil, "boundedQueries.privateRepos"},
		{"duplicate slug", bq(local + "," + strings.Replace(local, `"o/r"`, `"O/R"`, 1)), nil, "boundedQueries.privateRepos[1]"},
		{"duplicate key", `{"agent":{"user":"nobody","user":"root"}}`, nil, "duplicate key"},
		{"truncated", `{"agent":{"user":"nobody"}`, nil, "cfg.json:1:27: "},
		{"top-level array", `[]`, nil, "config"},
		{"agent network", `{"agent":{"user":"nobody","network":"bridge"},"boundedQueries":{"enabled":true,"privateRepos":[` + local + `]}}`, nil, "agent.network"},
		{"GitHub token allowed to the agent", `{"agent":{"user":"nobody","env":{"allow":["GH_TOKEN"]}},"boundedQueries":{"enabled":true,"privateRepos":[` + local + `]}}`, nil, "agent.env.allow[0]"},
	}
	require.GreaterOrEqual(t, len(cases), 30)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "cfg.json")
			require.NoError(t, os.WriteFile(cfg, []byte(tc.cfg), 0o600))
			run := func(args ...string) (int, string) { return runBinary(t, exe, dir, tc.env, "", args...) }
			vrc, vout := run("config", "validate", "--preflight", cfg)
			assert.Equal(t, 1, vrc, "validate: %s", vout)
			assert.Contains(t, vout, "awf config validate: ")
			assert.Contains(t, vout, tc.where, "validate names the place at fault")
			rrc, rout := run("run", "--config", cfg, "--", "/bin/true")
			assert.Equal(t, exitAWF, rrc, "awf run refuses it too: %s", rout)
			assert.NotContains(t, rout, "broker ready", "awf run got as far as the agent")
		})
	}
}

func TestConfigValidateGoodAndUsage(t *testing.T) {
	repo := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(
		`{"agent":{"user":"nobody"},"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/r","sensitivity":"internal","source":%q}]}}`, repo)), 0o600))
	rc, out, errOut := runAWF(t, "", "config", "validate", cfg)
	assert.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "config ok: bounded queries enabled")
	rc, out, _ = runAWF(t, "", "config", "validate", cfg, "--preflight")
	assert.Equal(t, 1, rc, "the test binary has no bounded-query next to it")
	assert.Empty(t, out)
	for _, args := range [][]string{{}, {"a", "b"}, {"--config", cfg, "extra"}, {"--bogus"}} {
		rc, out, errOut := runAWF(t, "", append([]string{"config", "validate"}, args...)...)
		assert.Equal(t, 2, rc, "%v", args)
		assert.Empty(t, out)
		assert.True(t, strings.Contains(errOut, "usage: awf config validate"), errOut)
	}
}
