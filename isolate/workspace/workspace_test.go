package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

func TestReadOutputRefusesAnythingButASmallRegularFile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("secret"), 0o600))
	cases := []struct {
		name  string
		setup func(dir string) error
		want  isolate.Kind
	}{
		{"ok", func(d string) error { return os.WriteFile(filepath.Join(d, "out"), []byte(`{"a":1}`), 0o644) }, isolate.KindOK},
		{"missing", func(d string) error { return nil }, isolate.KindOutputMissing},
		{"too large", func(d string) error { return os.WriteFile(filepath.Join(d, "out"), make([]byte, 101), 0o644) }, isolate.KindOutputTooLarge},
		{"symlink", func(d string) error { return os.Symlink(secret, filepath.Join(d, "out")) }, isolate.KindOutputInvalid},
		{"directory", func(d string) error { return os.Mkdir(filepath.Join(d, "out"), 0o755) }, isolate.KindOutputInvalid},
		{"fifo", func(d string) error { return syscall.Mkfifo(filepath.Join(d, "out"), 0o644) }, isolate.KindOutputInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			require.NoError(t, c.setup(d))
			b, kind, err := ReadOutputFrom(d, 100)
			assert.Equal(t, c.want, kind, "%v", err)
			if c.want == isolate.KindOK {
				assert.Equal(t, []byte(`{"a":1}`), b)
			} else {
				assert.Nil(t, b)
				assert.Error(t, err)
			}
		})
	}
	// /query itself being a symlink is refused too.
	d := t.TempDir()
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(d, "q")))
	_, kind, _ := ReadOutputFrom(filepath.Join(d, "q"), 100)
	assert.Equal(t, isolate.KindOutputInvalid, kind)
}

func TestCreateAndRemoveLeaveNothing(t *testing.T) {
	parent := t.TempDir()
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "f"), []byte("x"), 0o444))
	l := isolate.DefaultLimits()
	ctx := context.Background()
	ws, err := Create(ctx, parent, Journal{Backend: "t", RunID: "r", SandboxID: "s", Name: "r-s"}, l, seed)
	require.NoError(t, err)
	require.NoError(t, ws.WriteScript([]byte("pass\n")))
	tmp, err := ws.MountScratch("tmp", 1<<20)
	require.NoError(t, err)

	j, err := ReadJournal(ws.Dir)
	require.NoError(t, err)
	assert.Equal(t, seed, j.Repo)
	names, err := List(parent)
	require.NoError(t, err)
	assert.Equal(t, []string{"r-s"}, names)

	st, err := os.Stat(filepath.Join(ws.RepoDir(), "f"))
	require.NoError(t, err)
	assert.Equal(t, uint32(SandboxUID), st.Sys().(*syscall.Stat_t).Uid)
	assert.NotZero(t, st.Mode().Perm()&0o200, "the copy is owner-writable")
	for _, p := range []string{ws.QueryDir(), filepath.Join(ws.Dir, repoFSName), tmp} {
		assert.True(t, isMountPoint(t, p), p)
	}

	require.NoError(t, Remove(ctx, ws.Dir))
	_, err = os.Stat(ws.Dir)
	assert.True(t, os.IsNotExist(err))
	mi, err := os.ReadFile("/proc/thread-self/mountinfo")
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(mi), parent), "mounts left")
	require.NoError(t, Remove(ctx, ws.Dir), "removing twice is fine")
	st, err = os.Stat(filepath.Join(seed, "f"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o444), st.Mode().Perm(), "the seed is untouched")
}

func isMountPoint(t *testing.T, p string) bool {
	t.Helper()
	var a, b syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &a))
	require.NoError(t, syscall.Stat(filepath.Dir(p), &b))
	return a.Dev != b.Dev
}
