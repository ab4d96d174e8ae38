package host

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/isolate/enclave"
)

// gitRepo makes a real git repository in a temp dir and applies each
// "git config" argument list to it.
func gitRepo(t *testing.T, configs ...[]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	git(t, dir, "init", "-q", "-b", "main")
	for _, c := range configs {
		git(t, dir, append([]string{"config"}, c...)...)
	}
	return dir
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
}

const fakeToken = "ghs_e2eFakeToken0123456789abcdefABCDEF"

func TestFindPersistedCredentials(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		configs [][]string
		want    []string // substrings of the findings, in order
	}{
		{"clean", [][]string{{"remote.origin.url", "https://github.com/o/r.git"}}, nil},
		{"ssh remote", [][]string{{"remote.origin.url", "ssh://git@github.com/o/r.git"}}, nil},
		{"scp remote", [][]string{{"remote.origin.url", "git@github.com:o/r.git"}}, nil},
		{"cache helper", [][]string{{"credential.helper", "cache --timeout=60"}}, nil},
		{"extraheader", [][]string{{"http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0"}}, []string{"http.https://github.com/.extraheader", "extraheader"}},
		{"global extraheader", [][]string{{"http.extraheader", "Authorization: Bearer x"}}, []string{"http.extraheader"}},
		{"store helper", [][]string{{"credential.helper", "store"}}, []string{"credential.helper", "store credential helper"}},
		{"scoped store helper", [][]string{{"credential.https://github.com.helper", "store --file /tmp/x"}}, []string{"credential.https://github.com.helper"}},
		{"inline helper", [][]string{{"credential.helper", "!f() { echo password=secret; }; f"}}, []string{"inline credential helper"}},
		{"token in remote", [][]string{{"remote.origin.url", "https://x-access-token:" + fakeToken + "@github.com/o/r.git"}}, []string{"remote.origin.url", "remote URL with credentials"}},
		{"user in remote", [][]string{{"remote.origin.url", "https://someone@github.com/o/r.git"}}, []string{"remote.origin.url"}},
		{"password on ssh", [][]string{{"remote.origin.pushurl", "ssh://git:pw@host/r.git"}}, []string{"remote.origin.pushurl"}},
		{"token in rewrite", [][]string{{"url.https://x-access-token:" + fakeToken + "@github.com/.insteadOf", "https://github.com/"}}, []string{"url.https://***@github.com/.insteadof", "URL rewrite"}},
		{"token anywhere", [][]string{{"core.sshCommand", "ssh -o X=" + fakeToken}}, []string{"core.sshcommand", "a GitHub token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := gitRepo(t, tc.configs...)
			sub := filepath.Join(dir, "a", "b")
			require.NoError(t, os.MkdirAll(sub, 0o755))
			found, err := FindPersistedCredentials(ctx, sub, "")
			require.NoError(t, err)
			if tc.want == nil {
				assert.Empty(t, found)
				return
			}
			require.Len(t, found, 1, "%v", found)
			s := found[0].String()
			for _, w := range tc.want {
				assert.Contains(t, s, w)
			}
			assert.Equal(t, filepath.Join(dir, ".git", "config"), found[0].File)
			assert.NotContains(t, s, fakeToken, "a finding never shows the token")
			assert.NotContains(t, s, "secret")
		})
	}
}

func TestFindPersistedCredentialsFollowsIncludes(t *testing.T) {
	ctx := context.Background()
	// actions/checkout v6 keeps the header in a file outside .git, included
	// under a gitdir condition.
	outside := filepath.Join(t.TempDir(), "git-credentials-1234.config")
	require.NoError(t, os.WriteFile(outside, []byte("[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic abc\n"), 0o600))
	dir := gitRepo(t)
	git(t, dir, "config", "includeIf.gitdir:"+filepath.Join(dir, ".git")+"/.path", outside)
	found, err := FindPersistedCredentials(ctx, dir, "")
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Equal(t, outside, found[0].File)

	// A relative include inside .git, and one in home.
	dir = gitRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "extra.config"), []byte("[credential]\n\thelper = store\n"), 0o600))
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "h.config"), []byte("[remote \"x\"]\n\turl = https://u:p@h/r\n"), 0o600))
	git(t, dir, "config", "--add", "include.path", "extra.config")
	git(t, dir, "config", "--add", "include.path", "~/h.config")
	git(t, dir, "config", "--add", "include.path", "missing.config")
	found, err = FindPersistedCredentials(ctx, dir, home)
	require.NoError(t, err)
	require.Len(t, found, 2, "%v", found)
	assert.Equal(t, filepath.Join(dir, ".git", "extra.config"), found[0].File)
	assert.Equal(t, filepath.Join(home, "h.config"), found[1].File)

	// An include cycle ends.
	dir = gitRepo(t)
	git(t, dir, "config", "include.path", "config")
	found, err = FindPersistedCredentials(ctx, dir, "")
	require.NoError(t, err)
	assert.Empty(t, found)
}

func TestFindPersistedCredentialsWorktreeAndEdges(t *testing.T) {
	ctx := context.Background()
	dir := gitRepo(t, []string{"http.https://github.com/.extraheader", "AUTHORIZATION: basic abc"})
	git(t, dir, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x")
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, dir, "worktree", "add", "-q", wt)
	found, err := FindPersistedCredentials(ctx, wt, "")
	require.NoError(t, err)
	require.Len(t, found, 1, "a linked worktree reads the common config")
	assert.Equal(t, filepath.Join(dir, ".git", "config"), found[0].File)

	notRepo := t.TempDir()
	found, err = FindPersistedCredentials(ctx, notRepo, "")
	require.NoError(t, err)
	assert.Empty(t, found)

	broken := gitRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(broken, ".git", "config"), []byte("[core\n"), 0o644))
	_, err = FindPersistedCredentials(ctx, broken, "")
	assert.ErrorContains(t, err, "cannot read it", "an unreadable config fails closed")
}

func TestCheckWorkingTree(t *testing.T) {
	ctx := context.Background()
	dir := gitRepo(t, []string{"http.https://github.com/.extraheader", "AUTHORIZATION: basic abc"})
	var progress strings.Builder
	o := Options{Config: &config.Config{}, Workdir: dir, Progress: &progress}
	err := checkWorkingTree(ctx, o, Agent{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "preflight: the agent's working tree "+dir+" holds a persisted git credential")
	assert.Contains(t, err.Error(), "remove it (actions/checkout: persist-credentials: false) or set agent.allowPersistedCredentials: true")
	o.Config.Agent.AllowPersistedCredentials = true
	require.NoError(t, checkWorkingTree(ctx, o, Agent{}))
	assert.Contains(t, progress.String(), "awf: WARNING: agent.allowPersistedCredentials is true")
	assert.NoError(t, checkWorkingTree(ctx, Options{Config: &config.Config{}, Workdir: t.TempDir()}, Agent{}))
}

// listen makes a real listening Unix socket and closes it at the end.
func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
}

func TestAgentHide(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	sock := filepath.Join(tmp, "engine.sock")
	listen(t, sock)
	host := filepath.Join(tmp, "host.sock")
	listen(t, host)
	got := AgentHide(HideInputs{
		PrivateBase: "/var/lib/awf/private", AuditArchiveBase: "/var/log/awf/",
		RootFS: "/srv/rootfs", StateDirs: []string{"/var/lib/awf/private/run/state"},
		Sources:      []string{"/srv/git/a", "/srv/git/a/sub", "relative", "/srv/git/a-b"},
		DockerSocket: sock, DockerHost: "unix://" + host,
	})
	// enclave.NetNSDir: the enclave namespaces come and go there at an
	// enclave's start and teardown, which a metered agent must not see.
	for _, want := range []string{"/var/lib/awf/private", "/var/log/awf", DefaultRootFSCache, "/srv/rootfs", "/srv/git/a", "/srv/git/a-b", sock, host, enclave.NetNSDir} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "/var/lib/awf/private/run/state", "covered by the private base")
	assert.NotContains(t, got, "/srv/git/a/sub", "covered by its parent")
	assert.NotContains(t, got, "relative")
	for _, p := range got {
		assert.Equal(t, filepath.Clean(p), p)
	}
	// A socket path that does not exist is not listed; a tcp DOCKER_HOST neither.
	got = AgentHide(HideInputs{PrivateBase: "/p", DockerSocket: filepath.Join(tmp, "gone.sock"), DockerHost: "tcp://127.0.0.1:2375"})
	assert.Contains(t, got, enclave.NetNSDir, "covered whether or not this run has bounded agents")
	assert.NotContains(t, got, filepath.Join(tmp, "gone.sock"))
	assert.Contains(t, EngineSockets(sock, ""), sock)
}

func TestCheckHideKept(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(tmp, "work")
	require.NoError(t, os.MkdirAll(filepath.Join(work, "src"), 0o755))
	require.NoError(t, os.Symlink(work, filepath.Join(tmp, "alias")))
	sock := filepath.Join(work, "docker.sock")
	listen(t, sock)
	kept := []keptPath{{"the agent's working directory", work, false}, {"the agent's home", "/", true}, {"the agent's home", "", true},
		{"the agent's home", filepath.Join(tmp, "nonexistent"), true}, {"the run's ingress directory", filepath.Join(tmp, "ingress", "run"), false}}
	for _, tc := range []struct {
		name string
		hide []string
		want string
	}{
		{"disjoint", []string{"/var/lib/awf/private", filepath.Join(tmp, "other")}, ""},
		{"source inside the working directory", []string{filepath.Join(work, "src")}, "private path " + filepath.Join(work, "src") + " must be hidden from the agent, but it overlaps the agent's working directory"},
		{"source containing the working directory", []string{tmp}, "overlaps the agent's working directory"},
		{"through a symlink", []string{filepath.Join(tmp, "alias", "src")}, "overlaps"},
		{"engine socket inside", []string{sock}, "container-engine socket " + sock},
		{"root", []string{"/"}, "cannot be hidden"},
		{"prefix is not containment", []string{work + "-x"}, ""},
		{"inside a home that does not exist", []string{filepath.Join(tmp, "nonexistent", "repo")}, ""},
		{"containing the ingress directory made later", []string{filepath.Join(tmp, "ingress")}, "overlaps the run's ingress directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkHideKept(tc.hide, kept, []string{sock})
			if tc.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.want)
			}
		})
	}
}

func TestAgentMayInherit(t *testing.T) {
	allow := []string{"OPENAI_API_KEY", "GH_TOKEN"}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"PATH", true}, {"GITHUB_REPOSITORY", true}, {"LANG", true},
		{"OPENAI_API_KEY", true}, {"ANTHROPIC_API_KEY", false}, {"openai_api_key", false},
		{"GH_TOKEN", false}, {"GITHUB_TOKEN", false}, {"GH_ENTERPRISE_TOKEN", false}, {"GITHUB_PAT", false},
		{"COPILOT_GITHUB_TOKEN", false}, {"ACTIONS_RUNTIME_TOKEN", false}, {"ACTIONS_ID_TOKEN_REQUEST_URL", false},
		{"ACTIONS_CACHE_URL", false}, {"SSH_AUTH_SOCK", false}, {"GIT_CONFIG_PARAMETERS", false},
	} {
		assert.Equal(t, tc.ok, AgentMayInherit(tc.name, allow), tc.name)
	}
	env := []string{"PATH=/bin", "GH_TOKEN=a", "OPENAI_API_KEY=b", "AWS_SECRET_ACCESS_KEY=c", "GH_TOKEN=d", "ACTIONS_CACHE_URL=e"}
	assert.Equal(t, []string{"ACTIONS_CACHE_URL", "AWS_SECRET_ACCESS_KEY", "GH_TOKEN"}, CredentialsToScrub(env, allow))
}

func TestAgentEnvAppliesTheRules(t *testing.T) {
	r := &Run{Layout: NewLayout("0123456789abcdef0123456789abcdef", "", "", ""), Agent: Agent{UID: 1000, GID: 1000}, EnvAllow: []string{"OPENAI_API_KEY"}}
	base := []string{"OPENAI_API_KEY=k", "ANTHROPIC_API_KEY=x", "GH_ENTERPRISE_TOKEN=x", "COPILOT_GITHUB_TOKEN=x", "GITHUB_PAT=x",
		"ACTIONS_RUNTIME_TOKEN=x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=x", "ACTIONS_ID_TOKEN_REQUEST_URL=x", "ACTIONS_CACHE_URL=x",
		"SSH_AUTH_SOCK=x", "GITHUB_REPOSITORY=o/r", "KEEP=1"}
	env := AgentEnv(base, r)
	assert.Contains(t, env, "OPENAI_API_KEY=k")
	assert.Contains(t, env, "GITHUB_REPOSITORY=o/r")
	assert.Contains(t, env, "KEEP=1")
	for _, kv := range env {
		assert.NotContains(t, kv, "=x", "%s reached the agent", kv)
	}
}
