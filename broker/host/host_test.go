package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

func TestAgentEnvRemovesTokensAndSetsTheRun(t *testing.T) {
	r := &Run{Layout: NewLayout("0123456789abcdef0123456789abcdef", "", "", ""), Agent: Agent{UID: 1000, GID: 1000, Name: "runner", Home: "/home/runner"}, Repos: []string{"o/a", "o/b"}}
	env := AgentEnv([]string{"GH_TOKEN=x", "GITHUB_TOKEN=y", "GITHUB_PERSONAL_ACCESS_TOKEN=z", proto.QuerySocketEnv + "=/evil", "PATH=/usr/bin", "HOME=/root", "KEEP=1"}, r)
	joined := strings.Join(env, "\n")
	for _, bad := range []string{"GH_TOKEN", "GITHUB_TOKEN", "GITHUB_PERSONAL_ACCESS_TOKEN", "/evil", "HOME=/root"} {
		assert.NotContains(t, joined, bad)
	}
	assert.Contains(t, env, "KEEP=1")
	assert.Contains(t, env, "PATH="+r.Layout.SkillDir+":/usr/bin")
	assert.Contains(t, env, proto.QuerySocketEnv+"="+r.Layout.Socket)
	assert.Contains(t, env, "AWF_BOUNDED_QUERY_REPOS=o/a,o/b")
	assert.Contains(t, env, "AWF_BOUNDED_QUERY_SKILL="+r.Layout.SkillPath)
	assert.Contains(t, env, "HOME=/home/runner")
}

func TestResolveAgent(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	_, err := ResolveAgent("root", env(nil))
	assert.ErrorContains(t, err, "refusing to run the agent as root")
	_, err = ResolveAgent("0", env(nil))
	assert.ErrorContains(t, err, "root")
	_, err = ResolveAgent("", env(map[string]string{"SUDO_UID": "0", "SUDO_GID": "0"}))
	assert.ErrorContains(t, err, "root")
	_, err = ResolveAgent("", env(nil))
	assert.ErrorContains(t, err, "SUDO_UID")
	a, err := ResolveAgent("", env(map[string]string{"SUDO_UID": "4321", "SUDO_GID": "4322"}))
	require.NoError(t, err)
	assert.Equal(t, 4321, a.UID)
	assert.Equal(t, 4322, a.GID)
	a, err = ResolveAgent("nobody", env(nil))
	require.NoError(t, err)
	assert.Equal(t, 65534, a.UID)
}

func TestShimArgsRoundTrip(t *testing.T) {
	a := ShimArgs{UID: 1, GID: 2, PrivateBase: "/p", IngressBase: "/i", IngressRoot: "/i/r"}
	b, err := ParseShimArgs(a.Argv())
	require.NoError(t, err)
	assert.Equal(t, a, b)
	_, err = ParseShimArgs([]string{"0", "0", "/p", "/i", ""})
	assert.Error(t, err)
	_, err = ParseShimArgs([]string{"1", "1", "p", "/i", ""})
	assert.Error(t, err)
}

func TestSpecRoundTripAndChecks(t *testing.T) {
	dir := t.TempDir()
	l := NewLayout("0123456789abcdef0123456789abcdef", dir, "", "")
	require.NoError(t, os.MkdirAll(l.PrivateRoot, 0o700))
	s := Spec{Layout: l, Runtime: "direct", RootFS: "/r", RootFSDigest: "sha256:x", MemoryBytes: 1 << 29, TimeoutSeconds: 30, MaxInvocations: 32, SocketUID: 1000, SocketGID: 1000}
	require.NoError(t, WriteSpec(s))
	got, err := ReadSpec(l.SpecPath)
	require.NoError(t, err)
	assert.Equal(t, s, got)
	assert.Error(t, WriteSpec(s), "the spec is written exclusively")
	require.NoError(t, os.Chmod(l.SpecPath, 0o644))
	_, err = ReadSpec(l.SpecPath)
	assert.Error(t, err, "a spec open to others is refused")
}

func TestSummary(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(`{"ts":"t","kind":"lifecycle","event":"listening"}
{"ts":"t","kind":"invocation","invocationId":"aaaaaaaaaaaaaaaaaaaaaaaa","repo":"o/r","bits":5,"bucketMs":100}
{"ts":"t","kind":"failure","invocationId":"bbbbbbbbbbbbbbbbbbbbbbbb","repo":"o/r","reason":"timeout","bits":4}
{"ts":"t","kind":"failure","invocationId":"framing","reason":"frame-rejected"}
{"ts":"t","kind":"failure","invocationId":"cccccccccccccccccccccccc","reason":"invalid-request"}
`), 0o600))
	s, err := Summary(p)
	require.NoError(t, err)
	assert.Equal(t, "3 requests: 1 answered, 2 failed (invalid-request ×1, timeout ×1)\n  o/r: 9 bits charged", s)
}

func TestSweepOrphans(t *testing.T) {
	base := t.TempDir()
	ing := t.TempDir()
	arch := t.TempDir()
	ctx := t.Context()
	// An abandoned run: lock file present, nobody holds it.
	dead := NewLayout("11111111111111111111111111111111", base, ing, arch)
	require.NoError(t, os.MkdirAll(dead.AuditDir, 0o700))
	require.NoError(t, os.WriteFile(dead.AuditDir+"/bounded-query.jsonl", []byte("{}\n"), 0o600))
	require.NoError(t, os.WriteFile(dead.LockPath, nil, 0o600))
	require.NoError(t, os.MkdirAll(dead.SkillDir, 0o755))
	// A live run: it holds its lock.
	live := NewLayout("22222222222222222222222222222222", base, ing, arch)
	require.NoError(t, os.MkdirAll(live.PrivateRoot, 0o700))
	lock, err := lockRun(live.LockPath)
	require.NoError(t, err)
	defer lock.Close()
	// A run being prepared: no lock file yet, just created.
	young := NewLayout("33333333333333333333333333333333", base, ing, arch)
	require.NoError(t, os.MkdirAll(young.PrivateRoot, 0o700))

	n, err := SweepOrphans(ctx, base, ing, arch)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.NoDirExists(t, dead.PrivateRoot)
	assert.NoDirExists(t, dead.IngressRoot)
	assert.FileExists(t, dead.AuditArchive+"/bounded-query.jsonl")
	assert.DirExists(t, live.PrivateRoot)
	assert.DirExists(t, young.PrivateRoot)
}

// TestSweepOrphansKeepsUnsweepableRoot: a dead run whose runtime cannot be
// swept (its Docker Engine is gone) is kept for the next sweep and reported
// with its run id, and does not stop the sweep of the other dead runs.
func TestSweepOrphansKeepsUnsweepableRoot(t *testing.T) {
	base, ing, arch := t.TempDir(), t.TempDir(), t.TempDir()
	ctx := t.Context()
	stuck := NewLayout("44444444444444444444444444444444", base, ing, arch)
	require.NoError(t, os.MkdirAll(stuck.StateDir, 0o700))
	require.NoError(t, os.WriteFile(stuck.LockPath, nil, 0o600))
	require.NoError(t, WriteSpec(Spec{Layout: stuck, Runtime: "docker", DockerSocket: filepath.Join(t.TempDir(), "gone.sock")}))
	dead := NewLayout("55555555555555555555555555555555", base, ing, arch)
	require.NoError(t, os.MkdirAll(dead.AuditDir, 0o700))
	require.NoError(t, os.WriteFile(dead.LockPath, nil, 0o600))

	n, err := SweepOrphans(ctx, base, ing, arch)
	require.Error(t, err, "a dead run that could not be reclaimed must be reported")
	assert.Contains(t, err.Error(), stuck.RunID)
	assert.Equal(t, 1, n, "the other dead run is still reclaimed")
	assert.DirExists(t, stuck.PrivateRoot, "an unsweepable root is kept for the next sweep")
	assert.NoDirExists(t, dead.PrivateRoot)
}
