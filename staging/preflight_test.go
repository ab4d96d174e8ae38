package staging

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckPrivateRoot(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(base, "work")
	require.NoError(t, os.MkdirAll(filepath.Join(work, "sub"), 0o755))
	priv := filepath.Join(base, "var", "private")
	require.NoError(t, os.MkdirAll(priv, 0o700))
	// alias/ is a symlink to work/: a root "elsewhere" under it is really in work.
	require.NoError(t, os.Symlink(work, filepath.Join(base, "alias")))
	require.NoError(t, os.Symlink(filepath.Join(base, "var"), filepath.Join(base, "varlink")))
	require.NoError(t, os.Symlink(filepath.Join(base, "nowhere"), filepath.Join(base, "dangling")))

	for _, tc := range []struct {
		name    string
		root    string
		visible []string
		ok      bool
	}{
		{"disjoint", priv, []string{work, "/usr/local/bin"}, true},
		{"missing root, disjoint", filepath.Join(base, "var", "new", "root"), []string{work}, true},
		{"same path", work, []string{work}, false},
		{"root inside visible", filepath.Join(work, "sub", "priv"), []string{work}, false},
		{"visible inside root", priv, []string{filepath.Join(priv, "x")}, false},
		{"root reached through a symlink into visible", filepath.Join(base, "alias", "priv"), []string{work}, false},
		{"missing root below a symlink into visible", filepath.Join(base, "alias", "a", "b", "c"), []string{work}, false},
		{"visible reached through a symlink into root", priv, []string{filepath.Join(base, "varlink", "private", "y")}, false},
		{"visible is the filesystem root", priv, []string{"/"}, false},
		{"trailing slash and dots", priv + "/./", []string{filepath.Join(priv, "..", "private")}, false},
		{"dangling symlink root", filepath.Join(base, "dangling", "x"), []string{work}, false},
		{"relative root", "private", []string{work}, false},
		{"relative visible", priv, []string{"work"}, false},
		{"prefix is not containment", filepath.Join(base, "wor"), []string{work}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPrivateRoot(tc.root, tc.visible)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
