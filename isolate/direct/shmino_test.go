package direct_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The kernel's internal shm mount numbers every memory file (memfd, System
// V shm, a shared mapping of /dev/zero) from one host-wide counter, in
// per-CPU batches of shmBatch; a fresh batch starts at a multiple of it. The
// policy refuses memfd_create, shmget and shared anonymous mmap, but a
// shared mapping of a writable /dev/zero descriptor still makes such a file.
// The agent, or any host process, reads the counter with memfd_create and
// fstat, so a sandbox that could move it would signal out.
const shmBatch = 1024

// shmPush is how far a sender moves the counter for a 1 bit.
const shmPush = 16384

// shmSender maps /dev/zero shared N times when BIT is 1, read-write if it
// may open it so, else read-only (which the kernel makes a private mapping).
const shmSender = `import mmap, os
BIT = %d
mode = "none"
n = 0
try:
    fd = os.open("/dev/zero", os.O_RDWR)
    mode, prot = "rw", mmap.PROT_READ | mmap.PROT_WRITE
except OSError:
    fd = os.open("/dev/zero", os.O_RDONLY)
    mode, prot = "ro", mmap.PROT_READ
for i in range(%d if BIT else 0):
    m = mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=prot)
    m.close()
    n += 1
open("/query/out", "w").write('{"mode": "%%s", "maps": %%d}' %% (mode, n))
`

// hostShmCounter reads the shm mount's counter with fresh memfds.
func hostShmCounter(t testing.TB) int64 {
	t.Helper()
	for i := 0; i < 3*shmBatch; i++ {
		fd, err := unix.MemfdCreate("awf-test", unix.MFD_CLOEXEC)
		require.NoError(t, err)
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		require.NoError(t, err)
		if st.Ino%shmBatch == 0 {
			return int64(st.Ino)
		}
	}
	t.Fatalf("no fresh shm inode batch in %d memfds", 3*shmBatch)
	return 0
}

// TestShmInodeCounterChannel sends a random 64-bit secret from sandboxes
// to the host's shm inode counter, one bit per sandbox, and decodes it from
// the host as the agent could. It must decode at chance: the sandbox's
// /dev/zero is read-only for uid 65534, so its shared mappings are private.
func TestShmInodeCounterChannel(t *testing.T) {
	const bits = 64
	e := newEnv(t)
	tpl := e.template(t, "")
	secret := secretBits(t, bits)
	var delta []int64
	modes := map[string]int{}
	for _, b := range secret {
		bit := 0
		if b {
			bit = 1
		}
		h0 := hostShmCounter(t)
		m := decodeOut(t, e.run(t, tpl, fmt.Sprintf(shmSender, bit, shmPush)))
		modes[m["mode"].(string)]++
		delta = append(delta, hostShmCounter(t)-h0)
	}
	ok := 0
	for i, d := range delta {
		if (d > shmPush/2) == secret[i] {
			ok++
		}
	}
	t.Logf("shm inode counter: host decodes %d/%d bits; /dev/zero opened %v; deltas %v", ok, bits, modes, delta)
	assert.Equal(t, map[string]int{"ro": bits}, modes, "/dev/zero must not open read-write")
	assert.LessOrEqual(t, ok, chanceMax, "a sandbox moves the shm inode counter")
}
