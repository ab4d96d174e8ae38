package jsonfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spec stands for a spec of awf's, a struct WriteSpec and ReadSpec carry.
type spec struct {
	Name  string
	Count int
}

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

func TestSpecRoundTrip(t *testing.T) {
	require.Zero(t, os.Geteuid(), "ReadSpec accepts only root-owned files: run the tests as root")
	p := filepath.Join(t.TempDir(), "spec.json")
	want := spec{Name: "n", Count: 3}
	require.NoError(t, WriteSpec(p, "test spec", want))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	var got spec
	require.NoError(t, ReadSpec(p, "test spec", &got))
	assert.Equal(t, want, got)
	err = WriteSpec(p, "test spec", want)
	require.Error(t, err, "written exclusively")
	assert.Regexp(t, "^test spec: ", err.Error())
}

func TestReadSpecRefuses(t *testing.T) {
	require.Zero(t, os.Geteuid(), "ReadSpec accepts only root-owned files: run the tests as root")
	for _, tc := range []struct {
		name string
		make func(t *testing.T, p string)
		want string
	}{
		{"missing", func(*testing.T, string) {}, "test spec: open "},
		{"open to others", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte(`{}`), 0o644))
			require.NoError(t, os.Chmod(p, 0o644))
		}, "must be a regular root-owned file closed to others"},
		{"not owned by root", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte(`{}`), 0o600))
			require.NoError(t, os.Chown(p, 65534, 65534))
		}, "must be a regular root-owned file closed to others"},
		{"a directory", func(t *testing.T, p string) {
			require.NoError(t, os.Mkdir(p, 0o700))
		}, "must be a regular root-owned file closed to others"},
		{"a symbolic link", func(t *testing.T, p string) {
			real := p + ".real"
			require.NoError(t, WriteSpec(real, "test spec", spec{}))
			require.NoError(t, os.Symlink(real, p))
		}, "test spec: open "},
		{"unknown field", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte(`{"Name":"n","Extra":1}`), 0o600))
		}, `unknown field "Extra"`},
		{"larger than the cap", func(t *testing.T, p string) {
			big := []byte(`{"Name":"`)
			for len(big) < MaxSpecBytes+1 {
				big = append(big, 'x')
			}
			require.NoError(t, os.WriteFile(p, append(big, `"}`...), 0o600))
		}, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "spec.json")
			tc.make(t, p)
			var s spec
			err := ReadSpec(p, "test spec", &s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
