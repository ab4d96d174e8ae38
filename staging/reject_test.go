package staging

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// requireRule asserts that err is a rejection under rule.
func requireRule(t *testing.T, err error, rule string) {
	t.Helper()
	require.Error(t, err)
	var re *RejectError
	require.True(t, errors.As(err, &re), "want a RejectError, got %v", err)
	assert.Equal(t, rule, re.Rule, "%v", err)
}

// TestStageRejectsCraftedRemoteRepositories serves each crafted repository
// over authenticated smart HTTP and checks Stage rejects it and leaves nothing.
func TestStageRejectsCraftedRemoteRepositories(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec repoSpec
		rule string
	}{
		{"gitmodules at the root", repoSpec{files: map[string]string{
			".gitmodules": "[submodule \"x\"]\n\tpath = x\n\turl = https://example.com/x.git\n", "a": "a"}}, RuleSubmodule},
		{"gitmodules nested", repoSpec{files: map[string]string{"sub/dir/.gitmodules": "", "a": "a"}}, RuleSubmodule},
		{"gitmodules other case", repoSpec{files: map[string]string{"sub/.GitModules": "", "a": "a"}}, RuleSubmodule},
		{"gitlink without gitmodules", repoSpec{files: map[string]string{"a": "a"}, gitlinks: []string{"vendor/lib"}}, RuleGitlink},
		{"gitlink at the root", repoSpec{files: map[string]string{"a": "a"}, gitlinks: []string{"no"}}, RuleGitlink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "acme/crafted", tc.spec)
			_, err := Stage(context.Background(), f.opts(), []Repo{{Slug: "acme/crafted", Sensitivity: "public"}})
			requireRule(t, err, tc.rule)
			assert.Empty(t, listDir(t, f.root))
		})
	}
}

// TestStageRejectsCraftedLocalSources crafts pre-provisioned clones that
// break one rule each.
func TestStageRejectsCraftedLocalSources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		craft func(t *testing.T, work string) string // returns the source path
		rule  string
	}{
		{".git is a symlink", func(t *testing.T, work string) string {
			src := filepath.Join(t.TempDir(), "src")
			require.NoError(t, os.Mkdir(src, 0o755))
			require.NoError(t, os.Symlink(filepath.Join(work, ".git"), filepath.Join(src, ".git")))
			return src
		}, RuleGitDirSymlink},
		{".git is a gitdir file", func(t *testing.T, work string) string {
			src := filepath.Join(t.TempDir(), "src")
			writeFile(t, filepath.Join(src, ".git"), "gitdir: "+filepath.Join(work, ".git")+"\n", 0o644)
			return src
		}, RuleGitDirFile},
		{"linked worktree checkout", func(t *testing.T, work string) string {
			wt := filepath.Join(t.TempDir(), "wt")
			tgit(t, work, "worktree", "add", "-q", "--detach", wt)
			return wt
		}, RuleGitDirFile},
		{"repository with linked worktrees", func(t *testing.T, work string) string {
			tgit(t, work, "worktree", "add", "-q", "--detach", filepath.Join(t.TempDir(), "wt"))
			return work
		}, RuleWorktree},
		{"commondir in the git dir", func(t *testing.T, work string) string {
			writeFile(t, filepath.Join(work, ".git", "commondir"), "../elsewhere\n", 0o644)
			return work
		}, RuleWorktree},
		{"alternates", func(t *testing.T, work string) string {
			shared := filepath.Join(t.TempDir(), "shared")
			tgit(t, "", "clone", "-q", "--shared", work, shared)
			return shared
		}, RuleAlternates},
		{"http alternates", func(t *testing.T, work string) string {
			writeFile(t, filepath.Join(work, ".git", "objects", "info", "http-alternates"), "https://example.com/objects\n", 0o644)
			return work
		}, RuleAlternates},
		{"alternates in a bare mirror", func(t *testing.T, work string) string {
			bare := filepath.Join(t.TempDir(), "m.git")
			tgit(t, "", "clone", "-q", "--bare", "--shared", work, bare)
			return bare
		}, RuleAlternates},
		{"submodule state in the git dir", func(t *testing.T, work string) string {
			require.NoError(t, os.MkdirAll(filepath.Join(work, ".git", "modules", "x"), 0o755))
			return work
		}, RuleSubmodule},
		{"FIFO in the tree", func(t *testing.T, work string) string {
			require.NoError(t, unix.Mkfifo(filepath.Join(work, "src", "pipe"), 0o644))
			return work
		}, RuleSpecialFile},
		{"socket in the tree", func(t *testing.T, work string) string {
			makeSocket(t, filepath.Join(work, "sock"))
			return work
		}, RuleSpecialFile},
		{"character device in the tree", func(t *testing.T, work string) string {
			require.NoError(t, unix.Mknod(filepath.Join(work, "src", "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
			return work
		}, RuleSpecialFile},
		{"block device in the git dir", func(t *testing.T, work string) string {
			require.NoError(t, unix.Mknod(filepath.Join(work, ".git", "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
			return work
		}, RuleSpecialFile},
		{"not a repository", func(t *testing.T, work string) string { return t.TempDir() }, RuleNotRepository},
		{"git dir owned by another user", func(t *testing.T, work string) string {
			require.NoError(t, os.Lchown(filepath.Join(work, ".git"), 65534, 65534))
			return work
		}, RuleForeignOwner},
		{"source is a symlink", func(t *testing.T, work string) string {
			l := filepath.Join(t.TempDir(), "l")
			require.NoError(t, os.Symlink(work, l))
			return l
		}, RuleNotRepository},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, _ := makeWorkRepo(t, defaultSpec("x"))
			src := tc.craft(t, work)
			root := newPrivateRoot(t)
			_, err := Stage(context.Background(), Options{PrivateRoot: root, RunID: randHex(t, 16)},
				[]Repo{{Slug: "acme/local", Sensitivity: "public", Source: src}})
			requireRule(t, err, tc.rule)
			assert.Empty(t, listDir(t, root))
		})
	}
}

func makeSocket(t *testing.T, p string) {
	t.Helper()
	l, err := net.Listen("unix", p)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
}

// TestScrubSeedRejects applies the post-clone scrub to a fresh clone that is
// then crafted, for the rules git itself would never let a clone break.
func TestScrubSeedRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		craft func(t *testing.T, seed string)
		rule  string
	}{
		{".git is a symlink", func(t *testing.T, seed string) {
			require.NoError(t, os.Rename(filepath.Join(seed, ".git"), filepath.Join(seed, "..", "moved.git")))
			require.NoError(t, os.Symlink("../moved.git", filepath.Join(seed, ".git")))
		}, RuleGitDirSymlink},
		{".git is a gitdir file", func(t *testing.T, seed string) {
			require.NoError(t, os.Rename(filepath.Join(seed, ".git"), filepath.Join(seed, "..", "moved.git")))
			writeFile(t, filepath.Join(seed, ".git"), "gitdir: ../moved.git\n", 0o644)
		}, RuleGitDirFile},
		{"alternates", func(t *testing.T, seed string) {
			writeFile(t, filepath.Join(seed, ".git", "objects", "info", "alternates"), "/tmp/objects\n", 0o644)
		}, RuleAlternates},
		{"symlink inside the git dir", func(t *testing.T, seed string) {
			require.NoError(t, os.Symlink("/etc", filepath.Join(seed, ".git", "refs", "heads", "evil")))
		}, RuleGitDirSymlink},
		{"worktrees", func(t *testing.T, seed string) {
			require.NoError(t, os.MkdirAll(filepath.Join(seed, ".git", "worktrees", "w"), 0o755))
		}, RuleWorktree},
		{"gitdir link", func(t *testing.T, seed string) {
			writeFile(t, filepath.Join(seed, ".git", "gitdir"), "/elsewhere/.git\n", 0o644)
		}, RuleWorktree},
		{"modules", func(t *testing.T, seed string) {
			require.NoError(t, os.MkdirAll(filepath.Join(seed, ".git", "modules"), 0o755))
		}, RuleSubmodule},
		{"untracked gitmodules", func(t *testing.T, seed string) {
			writeFile(t, filepath.Join(seed, "deep", ".gitmodules"), "", 0o644)
		}, RuleSubmodule},
		{"nested git dir", func(t *testing.T, seed string) {
			require.NoError(t, os.MkdirAll(filepath.Join(seed, "vendor", ".git"), 0o755))
		}, RuleNestedGitDir},
		{"FIFO", func(t *testing.T, seed string) {
			require.NoError(t, unix.Mkfifo(filepath.Join(seed, "src", "fifo"), 0o644))
		}, RuleSpecialFile},
		{"socket", func(t *testing.T, seed string) { makeSocket(t, filepath.Join(seed, "s")) }, RuleSpecialFile},
		{"device", func(t *testing.T, seed string) {
			require.NoError(t, unix.Mknod(filepath.Join(seed, "zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
		}, RuleSpecialFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, _ := makeWorkRepo(t, defaultSpec("x"))
			seed := filepath.Join(t.TempDir(), "seed")
			tgit(t, "", "clone", "-q", "--no-local", work, seed)
			tc.craft(t, seed)
			root := newPrivateRoot(t)
			creds, err := writeCredentials(root, "")
			require.NoError(t, err)
			defer creds.remove()
			g, err := newGitRunner(creds, 0, "")
			require.NoError(t, err)
			_, err = scrubSeed(context.Background(), g, seed)
			requireRule(t, err, tc.rule)
		})
	}
}
