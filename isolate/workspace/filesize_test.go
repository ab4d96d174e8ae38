package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestHitFileSize: the one rule by which every backend labels a job that
// RLIMIT_FSIZE stopped: a regular file at the limit in one of the given
// directories (a link is never followed, a descriptor's directory is
// walked), or CPython's EFBIG report on stderr.
func TestHitFileSize(t *testing.T) {
	big, small, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(big, "f"), make([]byte, 100), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(small, "f"), make([]byte, 99), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "f"), make([]byte, 500), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(elsewhere, "f"), filepath.Join(small, "link")))
	fd, err := unix.Open(big, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	byFD := fmt.Sprintf("/proc/self/fd/%d/", fd)
	for _, c := range []struct {
		name   string
		dirs   []string
		stderr string
		want   bool
	}{
		{"a file at the limit", []string{small, big}, "", true},
		{"below the limit, a link to a big file", []string{small}, "", false},
		{"through a descriptor", []string{small, byFD}, "", true},
		{"no directory, EFBIG on stderr", nil, "OSError: [Errno 27] File too large", true},
		{"another error", []string{small}, "OSError: [Errno 28] No space left on device", false},
		{"a missing directory", []string{filepath.Join(small, "gone")}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, HitFileSize(100, []byte(c.stderr), c.dirs...))
		})
	}
	assert.Equal(t, filepath.Join(big, "f"), FindFileAtLimit(100, small, big))
}
