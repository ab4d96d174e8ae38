package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
)

// The containment tests run the real awf run and check, from inside the
// agent, what reaches it: which credential variables, whether a local
// source, the rootfs or an engine socket can be read or reached, and that
// preflight refuses a persisted git credential and a private path the
// agent's view could not hide.

// writeAgentConfig is writeConfig with extra keys in the agent block.
func writeAgentConfig(t *testing.T, b bq, agent map[string]any) string {
	t.Helper()
	a := map[string]any{"user": agentUser}
	for k, v := range agent {
		a[k] = v
	}
	return writeDoc(t, map[string]any{"boundedQueries": enabled(b), "agent": a})
}

// agentIDs returns the uid and gid of the shared agent user.
func agentIDs(t *testing.T) (uint32, uint32) {
	t.Helper()
	u, err := user.Lookup(agentUser)
	require.NoError(t, err)
	uid, err := strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err := strconv.Atoi(u.Gid)
	require.NoError(t, err)
	return uint32(uid), uint32(gid)
}

// asAgent runs a shell snippet as the agent user, outside awf: the
// weakened twin of each probe, which shows the probe can see the thing
// when nothing hides it.
func asAgent(t *testing.T, snippet string) string {
	t.Helper()
	uid, gid := agentIDs(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", snippet)
	cmd.Dir = "/"
	cmd.Env = baseEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

const constQuery = `echo 'open("/query/out","w").write("1")' > /tmp/c.$$.py
echo "query $(bounded-query --repo demo/app --schema '{"type":"const","value":1}' < /tmp/c.$$.py)"
rm -f /tmp/c.$$.py
`

// TestAgentEnvironmentClasses: GitHub credentials and Actions runtime
// variables never reach the agent, other credentials only when
// agent.env.allow names them, and ordinary variables always.
func TestAgentEnvironmentClasses(t *testing.T) {
	cfg := writeAgentConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}},
		map[string]any{"env": map[string]any{"allow": []string{"OPENAI_API_KEY"}}})
	vars := map[string]bool{ // name -> reaches the agent
		"GH_TOKEN": false, "GITHUB_TOKEN": false, "GITHUB_PERSONAL_ACCESS_TOKEN": false,
		"GH_ENTERPRISE_TOKEN": false, "GITHUB_ENTERPRISE_TOKEN": false, "GITHUB_PAT": false,
		"COPILOT_GITHUB_TOKEN": false, "HOMEBREW_GITHUB_API_TOKEN": false,
		"ACTIONS_RUNTIME_TOKEN": false, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": false,
		"ACTIONS_ID_TOKEN_REQUEST_URL": false, "ACTIONS_CACHE_URL": false, "ACTIONS_RESULTS_URL": false,
		"ANTHROPIC_API_KEY": false, "SSH_AUTH_SOCK": false, "AWS_SECRET_ACCESS_KEY": false,
		"GIT_CONFIG_PARAMETERS": false,
		"OPENAI_API_KEY":        true, "GITHUB_REPOSITORY": true, "AWF_E2E_PLAIN": true,
	}
	var env []string
	var script strings.Builder
	for name := range vars {
		env = append(env, name+"=awf-e2e-value-"+name)
		script.WriteString("echo \"" + name + " ${" + name + ":-unset}\"\n")
	}
	script.WriteString("echo \"values $(cat /proc/self/environ | tr '\\0' '\\n' | grep -c awf-e2e-value-)\"\n")
	script.WriteString(constQuery)
	r := awfRun(t, cfg, agentScript(t, script.String()), env...)
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	reach := 0
	for name, ok := range vars {
		if ok {
			reach++
			assert.Equal(t, "awf-e2e-value-"+name, got[name], "%s must reach the agent", name)
		} else {
			assert.Equal(t, "unset", got[name], "%s reached the agent", name)
		}
	}
	assert.Equal(t, strconv.Itoa(reach), got["values"])
	assert.Equal(t, `{"status":"ok","result":1}`, got["query"])
	for name, ok := range vars {
		if !ok {
			assert.NotContains(t, r.stdout+r.stderr, "awf-e2e-value-"+name)
		}
	}
}

// TestAgentCannotReadSourceOrRootFS: the shared local source is mode 0755
// under 0755 parents, so the agent user can read it on the host (the
// twin); inside awf run it is an empty directory, and so is the rootfs,
// while bounded queries against it still answer.
func TestAgentCannotReadSourceOrRootFS(t *testing.T) {
	probe := `echo "src-entries $(ls -A "$SRC" 2>/dev/null | wc -l)"
echo "src-read $(cat "$SRC/LICENSE" 2>/dev/null | wc -c)"
echo "rootfs-entries $(ls -A "$ROOTFS" 2>/dev/null | wc -l)"
`
	twin := asAgent(t, "SRC="+repoDir+" ROOTFS="+rootfsDir+"\n"+probe)
	tg := lines(twin)
	require.NotEqual(t, "0", tg["src-entries"], "the twin cannot see the source: the test proves nothing\n%s", twin)
	require.NotEqual(t, "0", tg["src-read"], "the twin cannot read the source\n%s", twin)
	require.NotEqual(t, "0", tg["rootfs-entries"], "the twin cannot see the rootfs\n%s", twin)

	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}})
	r := awfRun(t, cfg, agentScript(t, probe+constQuery), "SRC="+repoDir, "ROOTFS="+rootfsDir)
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	assert.Equal(t, "0", got["src-entries"], "the agent sees the source")
	assert.Equal(t, "0", got["src-read"], "the agent reads the source")
	assert.Equal(t, "0", got["rootfs-entries"], "the agent sees the rootfs")
	assert.Equal(t, `{"status":"ok","result":1}`, got["query"])
}

// fakeEngine is a real listening Unix socket that counts connections.
type fakeEngine struct {
	path     string
	accepted atomic.Int64
}

func startFakeEngine(t *testing.T, dir string) *fakeEngine {
	t.Helper()
	f := &fakeEngine{path: filepath.Join(dir, "docker.sock")}
	l, err := net.Listen("unix", f.path)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(f.path, 0o777))
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); os.Remove(f.path) })
	return f
}

// TestEngineSocketUnreachable: a world-writable engine socket named by
// dockerSocket, and another named by DOCKER_HOST, accept the agent user
// on the host (the twin) but not the agent inside awf run.
func TestEngineSocketUnreachable(t *testing.T) {
	dir, err := os.MkdirTemp("", "awf-e2e-engine-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	sub := filepath.Join(dir, "host")
	require.NoError(t, os.Mkdir(sub, 0o755))
	cfgSock := startFakeEngine(t, dir)
	hostSock := startFakeEngine(t, sub)
	probe := `for s in "$S1" "$S2"; do
  if /usr/bin/python3 -c 'import socket,sys; c=socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])' "$s" 2>/dev/null; then echo "connect-$(basename $(dirname "$s")) yes"; else echo "connect-$(basename $(dirname "$s")) no"; fi
done
`
	twin := lines(asAgent(t, "S1="+cfgSock.path+" S2="+hostSock.path+"\n"+probe))
	require.Equal(t, "yes", twin["connect-"+filepath.Base(dir)], "the twin cannot connect: the test proves nothing")
	require.Equal(t, "yes", twin["connect-host"])
	require.Eventually(t, func() bool { return cfgSock.accepted.Load()+hostSock.accepted.Load() == 2 }, 10*time.Second, 10*time.Millisecond)
	before := cfgSock.accepted.Load() + hostSock.accepted.Load()

	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}, DockerSocket: cfgSock.path})
	r := awfRun(t, cfg, agentScript(t, probe+constQuery), "S1="+cfgSock.path, "S2="+hostSock.path, "DOCKER_HOST=unix://"+hostSock.path)
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	assert.Equal(t, "no", got["connect-"+filepath.Base(dir)], "the agent reached the configured engine socket")
	assert.Equal(t, "no", got["connect-host"], "the agent reached the DOCKER_HOST socket")
	assert.Equal(t, before, cfgSock.accepted.Load()+hostSock.accepted.Load(), "an engine socket accepted a connection during the run")
	assert.Equal(t, `{"status":"ok","result":1}`, got["query"])
}

// TestPreflightRefusesWhatCannotBeHidden: a source or an engine socket in
// the agent's working directory is refused before anything is staged.
func TestPreflightRefusesWhatCannotBeHidden(t *testing.T) {
	dirs := runDirs()
	// The shared source lives in the e2e work directory: run from there.
	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}})
	r := awfRunIn(t, filepath.Dir(repoDir), cfg, agentScript(t, "echo ran\n"))
	assert.Equal(t, 125, r.code, r.stderr)
	assert.Contains(t, r.stderr, "awf run: preflight: private path ")
	assert.Contains(t, r.stderr, "must be hidden from the agent, but it overlaps the agent's working directory "+filepath.Dir(repoDir))
	assert.NotContains(t, r.stdout, "ran")
	assert.NotContains(t, r.stderr, "staging")

	work, err := os.MkdirTemp("", "awf-e2e-work-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(work) })
	sock := startFakeEngine(t, work)
	cfg = writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}, DockerSocket: sock.path})
	r = awfRunIn(t, work, cfg, agentScript(t, "echo ran\n"))
	assert.Equal(t, 125, r.code, r.stderr)
	assert.Contains(t, r.stderr, "awf run: preflight: container-engine socket "+sock.path+" must be hidden from the agent")
	assert.NotContains(t, r.stdout, "ran")
	assertNoNewRunDirs(t, dirs)
}

// TestPersistedCredentialPreflight: an extraheader that actions/checkout
// would persist in the working tree fails preflight with the fix named;
// agent.allowPersistedCredentials starts anyway, with the warning.
func TestPersistedCredentialPreflight(t *testing.T) {
	dirs := runDirs()
	work, err := os.MkdirTemp("", "awf-e2e-checkout-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(work) })
	require.NoError(t, os.Chmod(work, 0o755))
	require.NoError(t, fixture.MakeRepo(work, "e2e", map[string]string{"README.md": "x\n"}))
	cmd := exec.Command("git", "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX2UyZQ==")
	cmd.Dir = work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	sub := filepath.Join(work, "src")
	require.NoError(t, os.Mkdir(sub, 0o755))

	cfg := writeConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}})
	r := awfRunIn(t, sub, cfg, agentScript(t, "echo ran\n"))
	assert.Equal(t, 125, r.code, r.stderr)
	assert.Contains(t, r.stderr, "awf run: preflight: the agent's working tree "+sub+" holds a persisted git credential")
	assert.Contains(t, r.stderr, "http.https://github.com/.extraheader in "+filepath.Join(work, ".git", "config"))
	assert.Contains(t, r.stderr, "remove it (actions/checkout: persist-credentials: false) or set agent.allowPersistedCredentials: true")
	assert.NotContains(t, r.stderr, "eC1hY2Nlc3MtdG9rZW46", "the credential itself is never printed")
	assert.NotContains(t, r.stdout, "ran")
	assertNoNewRunDirs(t, dirs)

	cfg = writeAgentConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}}, map[string]any{"allowPersistedCredentials": true})
	r = awfRunIn(t, sub, cfg, agentScript(t, "echo ran\n"+constQuery))
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "awf: warning: agent.allowPersistedCredentials is true")
	assert.Contains(t, r.stderr, "awf: WARNING: agent.allowPersistedCredentials is true: the agent can read the persisted git credential http.https://github.com/.extraheader")
	got := lines(r.stdout)
	assert.Equal(t, `{"status":"ok","result":1}`, got["query"])
}

// TestAgentNetworkNone: agent.network none leaves the agent only loopback,
// and the broker socket still answers.
func TestAgentNetworkNone(t *testing.T) {
	cfg := writeAgentConfig(t, bq{PrivateRepos: []repo{local("demo/app", "internal")}}, map[string]any{"network": "none"})
	r := awfRun(t, cfg, agentScript(t, `echo "ifaces $(/usr/bin/python3 -c 'import socket; print(",".join(sorted(n for _, n in socket.if_nameindex())))')"
`+constQuery))
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	assert.Equal(t, "lo", got["ifaces"])
	assert.Equal(t, `{"status":"ok","result":1}`, got["query"])
}
