package staging

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fixture is one served repository and a private root to stage it into.
type fixture struct {
	srv    *gitServer
	root   string
	runID  string
	token  string
	commit string
	work   string
}

func newFixture(t *testing.T, slug string, spec repoSpec) *fixture {
	t.Helper()
	f := &fixture{token: "tok_" + randHex(t, 20), runID: randHex(t, 16)}
	f.srv = newGitServer(t, f.token)
	f.work, f.commit = makeWorkRepo(t, spec)
	f.srv.add(t, slug, f.work)
	f.root = newPrivateRoot(t)
	return f
}

func (f *fixture) opts() Options {
	return Options{PrivateRoot: f.root, RunID: f.runID, Token: f.token, ServerURL: f.srv.URL}
}

// sandboxView bind-mounts a seed read-only on a directory that every user can
// reach, as a sandbox would see it (the private root itself is 0700).
func sandboxView(t *testing.T, seed string) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "awf-seed-view-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(parent, 0o755))
	view := filepath.Join(parent, "repo")
	require.NoError(t, os.Mkdir(view, 0o755))
	require.NoError(t, unix.Mount(seed, view, "", unix.MS_BIND, ""))
	t.Cleanup(func() {
		assert.NoError(t, unix.Unmount(view, unix.MNT_DETACH))
		assert.NoError(t, os.RemoveAll(parent))
	})
	require.NoError(t, unix.Mount("", view, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	return view
}

// runAs65534 runs a command as uid/gid 65534 (the sandbox user) in dir and
// returns its stdout.
func runAs65534(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "%v: %s", args, errb.String())
	return out.String()
}

func TestStageOverHTTPWithToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/widgets", defaultSpec("m1"))
	var events []Event
	o := f.opts()
	o.OnEvent = func(e Event) { events = append(events, e) }
	var progress bytes.Buffer
	o.Progress = &progress
	seeds, err := Stage(context.Background(), o, []Repo{{Slug: "Acme/Widgets", Sensitivity: "internal"}})
	require.NoError(t, err)
	require.Len(t, seeds, 1)
	s := seeds[0]
	assert.Equal(t, "acme/widgets", s.Repo)
	assert.Equal(t, SeedID(f.runID, "acme/widgets"), s.SeedID)
	assert.Equal(t, filepath.Join(f.root, "seeds", s.SeedID), s.Dir)
	assert.Equal(t, f.commit, s.Commit)
	assert.Equal(t, "internal", s.Sensitivity)

	// Only the seeds and the seed map remain in the private root.
	assert.ElementsMatch(t, []string{"seeds", SeedMapName}, listDir(t, f.root))
	m, err := ReadSeedMap(filepath.Join(f.root, SeedMapName))
	require.NoError(t, err)
	assert.Equal(t, NewSeedMap(f.runID, seeds), m)

	// Lifecycle: one staged event with the commit, then the credentials went.
	require.Len(t, events, 2)
	assert.Equal(t, EventSeedStaged, events[0].Kind)
	assert.Equal(t, f.commit, events[0].Commit)
	assert.Equal(t, EventCredentialsRemoved, events[1].Kind)
	assert.Regexp(t, `^staged acme/widgets commit `+f.commit+` in \S+\n$`, progress.String())
	assert.True(t, f.srv.v2.Load(), "git spoke protocol v2")

	// Scrubbed: minimal config, one branch, no remote, hooks, reflogs.
	gd := filepath.Join(s.Dir, ".git")
	cfg, err := os.ReadFile(filepath.Join(gd, "config"))
	require.NoError(t, err)
	assert.Equal(t, string(minimalConfig("sha1")), string(cfg))
	assert.ElementsMatch(t, []string{"HEAD", "config", "index", "objects", "refs", "packed-refs", "shallow"},
		filterOut(listDir(t, gd), "packed-refs"), "git dir entries")
	for _, gone := range []string{"hooks", "logs", "FETCH_HEAD", "ORIG_HEAD", "info", "description", "refs/remotes"} {
		_, err := os.Lstat(filepath.Join(gd, gone))
		assert.True(t, errors.Is(err, os.ErrNotExist), "%s must be gone", gone)
	}
	assert.Equal(t, "refs/heads/main", tgitRO(t, s.Dir, "for-each-ref", "--format=%(refname)"))
	assert.Empty(t, tgitRO(t, s.Dir, "remote"))

	// Read-only for everyone, but readable by the sandbox user; git works.
	require.NoError(t, VerifyReadOnly(context.Background(), s.Dir))
	st, err := os.Stat(filepath.Join(s.Dir, "bin/run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o555), st.Mode().Perm())
	st, err = os.Stat(filepath.Join(s.Dir, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o444), st.Mode().Perm())
	target, err := os.Readlink(filepath.Join(s.Dir, "link-abs"))
	require.NoError(t, err)
	assert.Equal(t, "/etc/passwd", target, "symlinks are kept verbatim")
	view := sandboxView(t, s.Dir)
	assert.Contains(t, runAs65534(t, view, "git", "log", "--format=%H %s"), f.commit+" second")
	assert.Contains(t, runAs65534(t, view, "git", "grep", "-n", "needle"), "src/deep/a/b.txt:1:needle m1")
	assert.Empty(t, runAs65534(t, view, "git", "status", "--porcelain"))
	assert.Contains(t, runAs65534(t, view, "cat", "src/link-in"), "hello m1")

	// The token is nowhere in the seed or the private root.
	assert.Empty(t, findBytes(t, f.root, []byte(f.token)))

	require.NoError(t, Release(context.Background(), f.root))
	assert.Empty(t, listDir(t, f.root))
	require.NoError(t, Release(context.Background(), f.root), "Release is idempotent")
}

func filterOut(names []string, optional string) []string {
	for _, n := range names {
		if n == optional {
			return names
		}
	}
	return append(names, optional)
}

// tgitRO runs a read-only git query on a seed as root.
func tgitRO(t *testing.T, dir string, args ...string) string {
	return tgit(t, dir, append([]string{"-c", "safe.directory=*"}, args...)...)
}

func TestStageFailsClosedWithoutTheRightToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, token string }{
		{"wrong token", "tok_wrong_" + randHex(t, 8)},
		{"no token", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "acme/widgets", defaultSpec("m"))
			o := f.opts()
			o.Token = tc.token
			var events []Event
			o.OnEvent = func(e Event) { events = append(events, e) }
			seeds, err := Stage(context.Background(), o, []Repo{{Slug: "acme/widgets", Sensitivity: "public"}})
			require.Error(t, err)
			assert.Nil(t, seeds)
			assert.Empty(t, listDir(t, f.root), "nothing is left after a failure")
			require.NotEmpty(t, events)
			assert.Equal(t, EventSeedFailed, events[0].Kind)
		})
	}
}

func TestStageRightTokenWorksWhereWrongFails(t *testing.T) {
	// The same server, the same repository: only the token differs.
	f := newFixture(t, "acme/one", defaultSpec("m"))
	o := f.opts()
	o.Token = f.token + "x"
	_, err := Stage(context.Background(), o, []Repo{{Slug: "acme/one", Sensitivity: "public"}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), f.token)
	_, err = Stage(context.Background(), f.opts(), []Repo{{Slug: "acme/one", Sensitivity: "public"}})
	require.NoError(t, err)
}

func TestStageCleansUpEverythingOnFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/one", defaultSpec("1"))
	w2, _ := makeWorkRepo(t, defaultSpec("2"))
	f.srv.add(t, "acme/two", w2)
	var kinds []string
	o := f.opts()
	o.OnEvent = func(e Event) { kinds = append(kinds, e.Kind) }
	_, err := Stage(context.Background(), o, []Repo{
		{Slug: "acme/one", Sensitivity: "public"},
		{Slug: "acme/two", Sensitivity: "internal"},
		{Slug: "acme/missing", Sensitivity: "public"},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "acme/missing")
	assert.Empty(t, listDir(t, f.root))
	assert.Equal(t, []string{EventSeedStaged, EventSeedStaged, EventSeedFailed, EventCredentialsRemoved}, kinds)
}

func TestStageRefusesLeftovers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/one", defaultSpec("1"))
	repos := []Repo{{Slug: "acme/one", Sensitivity: "public"}}

	// A pre-existing seeds directory is refused and left untouched.
	seeds := filepath.Join(f.root, SeedsDirName)
	stale := filepath.Join(seeds, SeedID(f.runID, "acme/one"))
	require.NoError(t, os.MkdirAll(stale, 0o700))
	writeFile(t, filepath.Join(stale, "keep"), "x", 0o600)
	_, err := Stage(context.Background(), f.opts(), repos)
	require.Error(t, err)
	assert.FileExists(t, filepath.Join(stale, "keep"))
	require.NoError(t, os.RemoveAll(seeds))

	// So is an existing seed map.
	writeFile(t, filepath.Join(f.root, SeedMapName), "{}", 0o600)
	_, err = Stage(context.Background(), f.opts(), repos)
	require.Error(t, err)
	assert.Equal(t, []string{SeedMapName}, listDir(t, f.root))
	require.NoError(t, os.Remove(filepath.Join(f.root, SeedMapName)))

	// And a stale staging HOME (from a crash) makes Stage fail closed.
	require.NoError(t, os.Mkdir(filepath.Join(f.root, stagingHomeName), 0o700))
	_, err = Stage(context.Background(), f.opts(), repos)
	require.Error(t, err)
	require.NoError(t, Release(context.Background(), f.root))
	assert.Empty(t, listDir(t, f.root))
	_, err = Stage(context.Background(), f.opts(), repos)
	require.NoError(t, err)
}

func TestStageOneRefusesAnExistingSeedDir(t *testing.T) {
	f := newFixture(t, "acme/one", defaultSpec("1"))
	seedsDir := filepath.Join(f.root, SeedsDirName)
	require.NoError(t, os.Mkdir(seedsDir, 0o700))
	dir := filepath.Join(seedsDir, SeedID(f.runID, "acme/one"))
	require.NoError(t, os.Mkdir(dir, 0o700))
	creds, err := writeCredentials(f.root, f.token)
	require.NoError(t, err)
	defer creds.remove()
	g, err := newGitRunner(creds, 0, f.token)
	require.NoError(t, err)
	plan, err := planStage(f.opts(), []Repo{{Slug: "acme/one", Sensitivity: "public"}})
	require.NoError(t, err)
	_, err = stageOne(context.Background(), g, seedsDir, f.runID, plan[0])
	require.ErrorIs(t, err, os.ErrExist)
}

func TestStageRejectsBadOptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/one", defaultSpec("1"))
	ok := Repo{Slug: "acme/one", Sensitivity: "public"}
	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(f.root, link))
	for _, tc := range []struct {
		name  string
		edit  func(*Options)
		repos []Repo
	}{
		{"no repos", nil, nil},
		{"relative root", func(o *Options) { o.PrivateRoot = "private" }, []Repo{ok}},
		{"root open to others", func(o *Options) { o.PrivateRoot = open }, []Repo{ok}},
		{"root is a symlink", func(o *Options) { o.PrivateRoot = link }, []Repo{ok}},
		{"bad run id", func(o *Options) { o.RunID = "xyz" }, []Repo{ok}},
		{"token with newline", func(o *Options) { o.Token = "a\nb" }, []Repo{ok}},
		{"ftp server", func(o *Options) { o.ServerURL = "ftp://example.com" }, []Repo{ok}},
		{"http to a remote host", func(o *Options) { o.ServerURL = "http://example.com" }, []Repo{ok}},
		{"bad slug", nil, []Repo{{Slug: "acme", Sensitivity: "public"}}},
		{"duplicate slug", nil, []Repo{ok, {Slug: " ACME/one ", Sensitivity: "internal"}}},
		{"unknown sensitivity", nil, []Repo{{Slug: "acme/one", Sensitivity: "ultra"}}},
		{"ref refspec", nil, []Repo{{Slug: "acme/one", Sensitivity: "public", Ref: "main:refs/heads/x"}}},
		{"ref option", nil, []Repo{{Slug: "acme/one", Sensitivity: "public", Ref: "--upload-pack=x"}}},
		{"source with user info", nil, []Repo{{Slug: "acme/one", Sensitivity: "public", Source: "https://u:secret@example.com/a.git"}}},
		{"relative local source", nil, []Repo{{Slug: "acme/one", Sensitivity: "public", Source: "some/dir"}}},
		{"ssh source", nil, []Repo{{Slug: "acme/one", Sensitivity: "public", Source: "ssh://git@example.com/a.git"}}},
		{"ext source", nil, []Repo{{Slug: "acme/one", Sensitivity: "public", Source: "ext::sh -c touch% /tmp/pwned"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.opts()
			if tc.edit != nil {
				tc.edit(&o)
			}
			_, err := Stage(context.Background(), o, tc.repos)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "secret")
			assert.Empty(t, listDir(t, f.root))
		})
	}
}

func TestStageRefs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/refs", defaultSpec("head"))
	first := tgit(t, f.work, "rev-parse", "HEAD~1")
	tgit(t, f.work, "tag", "-a", "-m", "v1", "v1.0", first)
	tgit(t, f.work, "branch", "release/1", first)
	// Re-publish with the tag and branch.
	require.NoError(t, os.RemoveAll(filepath.Join(f.srv.root, "acme/refs.git")))
	f.srv.add(t, "acme/refs", f.work)
	for _, tc := range []struct{ ref, want string }{
		{"main", f.commit},
		{"release/1", first},
		{"v1.0", first},
		{first, first},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			root := newPrivateRoot(t)
			o := f.opts()
			o.PrivateRoot = root
			seeds, err := Stage(context.Background(), o, []Repo{{Slug: "acme/refs", Sensitivity: "public", Ref: tc.ref}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, seeds[0].Commit)
			assert.Equal(t, tc.want, tgitRO(t, seeds[0].Dir, "rev-parse", "HEAD"))
			_, err = os.Lstat(filepath.Join(seeds[0].Dir, ".git", "FETCH_HEAD"))
			assert.ErrorIs(t, err, os.ErrNotExist)
			assert.Empty(t, tgitRO(t, seeds[0].Dir, "for-each-ref"))
			assert.Empty(t, findBytes(t, root, []byte(f.token)))
			require.NoError(t, VerifyReadOnly(context.Background(), seeds[0].Dir))
		})
	}
}

func TestStageLocalSource(t *testing.T) {
	t.Parallel()
	work, commit := makeWorkRepo(t, defaultSpec("local"))
	// A pre-provisioned clone whose configuration carries credentials.
	tgit(t, work, "remote", "add", "origin", "https://user:local-secret@example.com/acme/x.git")
	tgit(t, work, "config", "credential.helper", "store --file /tmp/local-secret")
	bare := filepath.Join(t.TempDir(), "mirror.git")
	tgit(t, "", "clone", "-q", "--bare", "--no-local", work, bare)
	before := treeHash(t, work)
	for _, src := range []string{work, bare} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			root := newPrivateRoot(t)
			seeds, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(t, 16)},
				[]Repo{{Slug: "acme/local", Sensitivity: "confidential", Source: src}})
			require.NoError(t, err)
			s := seeds[0]
			assert.Equal(t, commit, s.Commit)
			assert.Empty(t, findBytes(t, root, []byte("local-secret")))
			require.NoError(t, VerifyReadOnly(context.Background(), s.Dir), "no file is shared with the source")
			assert.Contains(t, tgitRO(t, s.Dir, "log", "--format=%s"), "second")
		})
	}
	assert.Equal(t, before, treeHash(t, work), "the source is never used in place")
}

func TestReleaseRemovesLeftovers(t *testing.T) {
	root := newPrivateRoot(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, SeedsDirName, "abc", "sub"), 0o700))
	writeFile(t, filepath.Join(root, SeedsDirName, "abc", "sub", "f"), "x", 0o444)
	require.NoError(t, os.Chmod(filepath.Join(root, SeedsDirName, "abc", "sub"), 0o555))
	writeFile(t, filepath.Join(root, tokenFileName), "tok", 0o600)
	writeFile(t, filepath.Join(root, askpassName), "#!/bin/sh", 0o700)
	require.NoError(t, os.Mkdir(filepath.Join(root, stagingHomeName), 0o700))
	writeFile(t, filepath.Join(root, SeedMapName), "{}", 0o600)
	writeFile(t, filepath.Join(root, "audit.jsonl"), "{}", 0o600)
	require.NoError(t, Release(context.Background(), root))
	assert.Equal(t, []string{"audit.jsonl"}, listDir(t, root), "only staging's own files are removed")
	assert.Error(t, Release(context.Background(), "relative"))
}

func TestStageReportsCredentialRemovalBeforeSeedMap(t *testing.T) {
	f := newFixture(t, "acme/one", defaultSpec("1"))
	o := f.opts()
	o.OnEvent = func(e Event) {
		if e.Kind == EventCredentialsRemoved {
			for _, n := range []string{tokenFileName, askpassName, stagingHomeName, SeedMapName} {
				_, err := os.Lstat(filepath.Join(f.root, n))
				assert.ErrorIs(t, err, os.ErrNotExist, n)
			}
		}
	}
	_, err := Stage(context.Background(), o, []Repo{{Slug: "acme/one", Sensitivity: "public"}})
	require.NoError(t, err)
}

func TestGitEnvironmentIsCompleteAndMinimal(t *testing.T) {
	root := newPrivateRoot(t)
	creds, err := writeCredentials(root, "tok_abc")
	require.NoError(t, err)
	defer creds.remove()
	g, err := newGitRunner(creds, 0, "tok_abc")
	require.NoError(t, err)
	env := strings.Join(g.env, "\n")
	assert.NotContains(t, env, "tok_abc")
	for _, want := range []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "HOME=" + creds.home,
		"GIT_ASKPASS=" + creds.askpass, "GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0="} {
		assert.Contains(t, g.env, want)
	}
	for _, e := range g.env {
		assert.NotRegexp(t, `^(SSH_|GH_TOKEN|GITHUB_TOKEN|GIT_DIR|GIT_SSL_NO_VERIFY|.*PROXY)`, e)
	}
	st, err := os.Stat(creds.tokenFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	// The helper answers the user name and streams the password from the file.
	out, err := exec.Command(creds.askpass, "Username for 'http://127.0.0.1': ").Output()
	require.NoError(t, err)
	assert.Equal(t, "x-access-token\n", string(out))
	out, err = exec.Command(creds.askpass, "Password for 'http://x@127.0.0.1': ").Output()
	require.NoError(t, err)
	assert.Equal(t, "tok_abc", string(out))
	script, err := os.ReadFile(creds.askpass)
	require.NoError(t, err)
	assert.NotContains(t, string(script), "tok_abc")
	require.NoError(t, creds.remove())
	assert.Empty(t, listDir(t, root))
}

func TestLoadSeedsRechecksEverySeed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/one", defaultSpec("1"))
	w2, _ := makeWorkRepo(t, defaultSpec("2"))
	f.srv.add(t, "acme/two", w2)
	repos := []Repo{{Slug: "acme/one", Sensitivity: "public"}, {Slug: "acme/two", Sensitivity: "sealed", Ref: "main"}}
	staged, err := Stage(context.Background(), f.opts(), repos)
	require.NoError(t, err)
	loaded, err := LoadSeeds(context.Background(), f.root)
	require.NoError(t, err)
	assert.Equal(t, staged, loaded)
	for _, s := range staged {
		head, err := ReadHead(s.Dir)
		require.NoError(t, err)
		assert.Equal(t, s.Commit, head)
		assert.Equal(t, SeedDir(f.root, s.SeedID), s.Dir)
	}

	// A seed whose HEAD moved, or that became writable, is refused.
	ref := filepath.Join(staged[0].Dir, ".git", "refs", "heads", "main")
	require.NoError(t, os.Chmod(ref, 0o644))
	_, err = LoadSeeds(context.Background(), f.root)
	require.Error(t, err)
	require.NoError(t, os.WriteFile(ref, []byte(staged[1].Commit+"\n"), 0o644))
	require.NoError(t, os.Chmod(ref, 0o444))
	_, err = LoadSeeds(context.Background(), f.root)
	require.ErrorContains(t, err, "HEAD is")
}

func TestStageGitTimeoutKillsEverything(t *testing.T) {
	t.Parallel()
	// A server that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	block := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block })}
	go srv.Serve(ln)
	t.Cleanup(func() { close(block); srv.Close() })
	root := newPrivateRoot(t)
	o := Options{PrivateRoot: root, RunID: randHex(t, 16), Token: "tok_" + randHex(t, 8),
		ServerURL: "http://" + ln.Addr().String(), GitTimeout: 2 * time.Second}
	_, err = Stage(context.Background(), o, []Repo{{Slug: "acme/slow", Sensitivity: "public"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, listDir(t, root))
	// No git process of this staging is left behind.
	pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range pids {
		b, _ := os.ReadFile(p)
		assert.NotContains(t, string(b), ln.Addr().String(), p)
		assert.NotContains(t, string(b), root, p)
	}
}

func TestStageSHA256Repository(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	tgit(t, "", "init", "-q", "--object-format=sha256", src)
	writeFile(t, filepath.Join(src, "a.txt"), "sha256 needle\n", 0o644)
	tgit(t, src, "add", "-A")
	tgit(t, src, "commit", "-q", "-m", "one")
	commit := tgit(t, src, "rev-parse", "HEAD")
	require.Len(t, commit, 64)
	root := newPrivateRoot(t)
	seeds, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(t, 16)},
		[]Repo{{Slug: "acme/sha256", Sensitivity: "internal", Source: src}})
	require.NoError(t, err)
	assert.Equal(t, commit, seeds[0].Commit)
	cfg, err := os.ReadFile(filepath.Join(seeds[0].Dir, ".git", "config"))
	require.NoError(t, err)
	assert.Equal(t, string(minimalConfig("sha256")), string(cfg))
	assert.Contains(t, tgitRO(t, seeds[0].Dir, "grep", "needle"), "a.txt")
	loaded, err := LoadSeeds(context.Background(), root)
	require.NoError(t, err)
	assert.Equal(t, seeds, loaded)
}

func TestStageRefusesRedirects(t *testing.T) {
	t.Parallel()
	// The target records every request it receives.
	var hits atomic.Int64
	target := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	token := "tok_" + randHex(t, 12)
	for _, authFirst := range []bool{false, true} {
		redirector := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, pass, ok := r.BasicAuth(); authFirst && (!ok || pass != token) {
				w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, target+r.URL.Path+"?"+r.URL.RawQuery, http.StatusMovedPermanently)
		}))
		root := newPrivateRoot(t)
		_, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(t, 16), Token: token, ServerURL: redirector},
			[]Repo{{Slug: "acme/moved", Sensitivity: "public"}})
		require.Error(t, err)
		assert.Empty(t, listDir(t, root))
	}
	assert.Zero(t, hits.Load(), "a redirect is never followed, so the credential never reaches another host")
}

// newLoopbackServer serves h on 127.0.0.1 and returns its base URL.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func TestStageOffersTheTokenOnlyToTheServerHost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "acme/home", defaultSpec("home"))
	// Another host (another port on loopback) that demands the same token.
	other := newGitServer(t, f.token)
	w, _ := makeWorkRepo(t, defaultSpec("other"))
	other.add(t, "mirror/x", w)
	var auth atomic.Int64
	spy := newLoopbackServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			auth.Add(1)
		}
		rw.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		rw.WriteHeader(http.StatusUnauthorized)
	}))
	for _, src := range []string{other.URL + "/mirror/x.git", spy + "/mirror/x.git"} {
		_, err := Stage(context.Background(), f.opts(), []Repo{{Slug: "mirror/x", Sensitivity: "public", Source: src}})
		require.Error(t, err, src)
		assert.Empty(t, listDir(t, f.root))
	}
	assert.Zero(t, auth.Load(), "no credential was sent to another host")
	// A source on the server host itself gets the token.
	_, err := Stage(context.Background(), f.opts(), []Repo{{Slug: "mirror/home", Sensitivity: "public", Source: f.srv.URL + "/acme/home.git"}})
	require.NoError(t, err)
}
