package agentloop

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/proto"
)

// TestAwaitStart: the loop runs only on exactly the empty start on a pipe
// (the handover's framing of no script), or with no start descriptor at
// all; it closes the descriptor either way and consumes nothing past the
// message.
func TestAwaitStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write string
		ok    bool
	}{
		{"the empty start", "0\n", true},
		{"the empty start and more", "0\nrest", true},
		{"end of file first", "", false},
		{"a partial start", "0", false},
		{"a payload", "3\nabc", false},
		{"no length", "\n", false},
		{"a long line", "00000000000000000000000000\n", false},
		{"not a number", "x\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			defer r.Close()
			fd, err := unix.Dup(int(r.Fd()))
			require.NoError(t, err)
			_, err = w.WriteString(tc.write)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			err = AwaitStart(fd)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
			var st unix.Stat_t
			assert.ErrorIs(t, unix.Fstat(fd, &st), unix.EBADF, "the start descriptor is closed")
			if tc.write == "0\nrest" {
				b := make([]byte, 8)
				n, _ := r.Read(b)
				assert.Equal(t, "rest", string(b[:n]), "nothing past the start is read")
			}
		})
	}
	t.Run("not a pipe", func(t *testing.T) {
		f, err := os.CreateTemp(t.TempDir(), "start")
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteString("0\n")
		require.NoError(t, err)
		fd, err := unix.Open(f.Name(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		assert.Error(t, AwaitStart(fd))
	})
	t.Run("no descriptor", func(t *testing.T) {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Close(fd))
		assert.Error(t, AwaitStart(fd))
	})
}

// TestAwaitHandedStart: without proto.EnclaveStartEnv the program was
// started at its invocation and runs at once, whatever descriptor 3 is (a
// Go runtime may hold one there itself); with it, the start is required;
// any other value is refused.
func TestAwaitHandedStart(t *testing.T) {
	t.Run("started at the invocation", func(t *testing.T) {
		require.NoError(t, os.Unsetenv(proto.EnclaveStartEnv))
		assert.NoError(t, AwaitHandedStart())
	})
	t.Run("another descriptor", func(t *testing.T) {
		t.Setenv(proto.EnclaveStartEnv, "4")
		assert.Error(t, AwaitHandedStart())
	})
}
