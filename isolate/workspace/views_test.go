package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// viewBooks returns books that use repository views under a fresh state
// directory and a read-only seed with one file; cleanup closes the views
// and checks that no mount of the state directory is left.
func viewBooks(t *testing.T) (*Books, string) {
	t.Helper()
	state := t.TempDir()
	b, err := OpenBooks("t", isolate.HostConfig{RunID: "r", StateDir: state})
	require.NoError(t, err)
	b.UseRepoViews()
	seed := filepath.Join(t.TempDir(), "seed")
	require.NoError(t, os.MkdirAll(filepath.Join(seed, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "d", "f"), []byte("seed"), 0o444))
	require.NoError(t, os.Chmod(filepath.Join(seed, "d"), 0o555))
	t.Cleanup(func() {
		_ = os.Chmod(filepath.Join(seed, "d"), 0o755)
		names, _ := List(b.Dir())
		for _, n := range names {
			assert.NoError(t, Remove(context.Background(), filepath.Join(b.Dir(), n)))
		}
		mi, err := os.ReadFile("/proc/thread-self/mountinfo")
		require.NoError(t, err)
		assert.NotContains(t, string(mi), state, "mounts left")
	})
	return b, seed
}

// TestRepoViewOverlays: every sandbox over a seed sees the seed at
// RepoDir, writable and owned by the sandbox user, through an overlay over
// one view; a sandbox's writes stay in its own upper layer (neither the
// next sandbox, the view nor the seed sees them); Destroy and Close leave
// nothing.
func TestRepoViewOverlays(t *testing.T) {
	b, seed := viewBooks(t)
	ctx := context.Background()
	tpl := isolate.Template{Repo: seed, Limits: isolate.DefaultLimits()}
	var views []string
	for i, write := range []bool{true, false} {
		ws, err := b.Create(ctx, tpl, nil)
		require.NoError(t, err)
		repo := ws.RepoDir()
		assert.True(t, isMountPoint(t, repo), "the repo is a mount of its own")
		mi, err := os.ReadFile("/proc/thread-self/mountinfo")
		require.NoError(t, err)
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[4] == repo {
				assert.Contains(t, line, " overlay ", "sandbox %d", i)
				assert.Contains(t, line, "noexec", "sandbox %d", i)
				for _, p := range strings.Split(line, ",") {
					if v, ok := strings.CutPrefix(p, "lowerdir="); ok {
						views = append(views, v)
					}
				}
			}
		}
		for _, p := range []string{repo, filepath.Join(repo, "d"), filepath.Join(repo, "d", "f")} {
			st, err := os.Stat(p)
			require.NoError(t, err)
			assert.Equal(t, uint32(SandboxUID), st.Sys().(*syscall.Stat_t).Uid, p)
			assert.NotZero(t, st.Mode().Perm()&0o200, "%s is owner-writable", p)
		}
		got, err := os.ReadFile(filepath.Join(repo, "d", "f"))
		require.NoError(t, err)
		assert.Equal(t, "seed", string(got), "sandbox %d sees the seed, not an earlier sandbox's write", i)
		_, err = os.Stat(filepath.Join(repo, "new"))
		assert.ErrorIs(t, err, os.ErrNotExist, "sandbox %d sees no earlier sandbox's file", i)
		if write {
			require.NoError(t, os.WriteFile(filepath.Join(repo, "d", "f"), []byte("changed"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(repo, "new"), []byte("new"), 0o644))
		}
		require.NoError(t, Remove(ctx, ws.Dir))
		require.NoError(t, b.Destroyed(ws.Journal.Name, nil))
	}
	require.Len(t, views, 2)
	assert.Equal(t, views[0], views[1], "one view per seed per runtime")
	got, err := os.ReadFile(filepath.Join(views[0], "d", "f"))
	require.NoError(t, err)
	assert.Equal(t, "seed", string(got), "the view is never written")
	got, err = os.ReadFile(filepath.Join(seed, "d", "f"))
	require.NoError(t, err)
	assert.Equal(t, "seed", string(got), "the seed is never written")

	require.NoError(t, b.CloseViews())
	names, err := List(b.Dir())
	require.NoError(t, err)
	assert.Empty(t, names, "the view store is removed at close")
}

// TestRepoViewFollowsTheSeed: a seed changed at the same path gets a new
// view, and the old one is not used again.
func TestRepoViewFollowsTheSeed(t *testing.T) {
	b, seed := viewBooks(t)
	ctx := context.Background()
	v1, err := b.repoView(ctx, seed)
	require.NoError(t, err)
	b.releaseView(v1)
	// A change of the seed directory's own inode (its ctime).
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(seed, "g"), []byte("g"), 0o444))
	v2, err := b.repoView(ctx, seed)
	require.NoError(t, err)
	b.releaseView(v2)
	assert.NotEqual(t, v1.Dir(), v2.Dir())
	_, err = os.Stat(filepath.Join(v2.Dir(), "g"))
	assert.NoError(t, err, "the new view has the new file")
	require.NoError(t, b.CloseViews())
}

// TestRepoViewStoreIsJournalled: the store's journal exists before any
// view does, so that a crash leaves a workspace Sweep finds (List), and
// the store is live for its own runtime; a store with a view in use stays
// at Close.
func TestRepoViewStoreIsJournalled(t *testing.T) {
	b, seed := viewBooks(t)
	ctx := context.Background()
	v, err := b.repoView(ctx, seed)
	require.NoError(t, err)
	names, err := List(b.Dir())
	require.NoError(t, err)
	require.Equal(t, []string{"r-views"}, names)
	j, err := ReadJournal(filepath.Join(b.Dir(), "r-views"))
	require.NoError(t, err)
	assert.Equal(t, "r", j.RunID)
	left, err := b.Leftovers()
	require.NoError(t, err)
	assert.Empty(t, left, "the runtime's own store is not a leftover")
	st, err := os.Stat(filepath.Join(b.Dir(), "r-views"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "no host user reaches a view")

	require.NoError(t, b.CloseViews())
	_, err = os.Stat(v.Dir())
	assert.NoError(t, err, "a view in use stays, journalled, for a later sweep")
}
