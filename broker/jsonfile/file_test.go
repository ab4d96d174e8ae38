package jsonfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenAppend(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.jsonl")
	require.NoError(t, os.WriteFile(p, []byte("old\n"), 0o644))
	require.NoError(t, os.Chmod(p, 0o644))
	f, err := OpenAppend(p)
	require.NoError(t, err)
	_, err = f.WriteString("new\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "old\nnew\n", string(got), "appended")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "set back to 0600")

	link := filepath.Join(dir, "link.jsonl")
	require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere"), link))
	_, err = OpenAppend(link)
	assert.Error(t, err, "never through a symbolic link")
	assert.NoFileExists(t, filepath.Join(dir, "elsewhere"))
}
