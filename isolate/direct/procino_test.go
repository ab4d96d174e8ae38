package direct_test

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
)

// The kernel numbers every procfs inode of a process (/proc/<pid>, its
// files, /proc/self/fd/<n>, /proc/sys entries) and every pipe and socket
// from one host-wide counter, get_next_ino. Each CPU takes a batch of
// inoBatch numbers from it at a time, so the first number of a fresh batch
// (n with n%inoBatch == 1) shows the counter itself. A script that could
// look up /proc entries could both move it (many fresh lookups) and read it
// (stat of fresh entries until a batch starts): one query would signal to
// the next.
const (
	inoBatch = 1024
	// inoPush is how far a sender moves the counter for a 1 bit; the
	// decoder's threshold is half of it. Host noise between two sandboxes
	// is a few thousand numbers on an idle host and up to about 30,000 on a
	// busy one.
	inoPush = 65536
)

// inoSender moves the counter by about inoPush when BIT is 1: each fd opened,
// looked up in /proc/self/fd and closed costs one fresh inode. A 0 does the
// same work on a path outside /proc, so that both bits take as long and only
// the lookups differ.
const inoSender = `import os
BIT = %d
d = "/proc/self/fd/" if BIT else "/tmp/"
n = 0
for i in range(%d):
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        os.lstat(d + str(fd))
        n += 1
    except OSError:
        pass
    os.close(fd)
    try:
        os.lstat(d + str(fd))
    except OSError:
        pass
open("/query/out", "w").write('{"looked_up": %%d}' %% n)
`

// inoReceiver reads the counter: fresh /proc/self/fd lookups until one
// starts a batch, or -1 when /proc cannot be looked up at all.
const inoReceiver = `import os
g = -1
try:
    os.stat("/proc/self/")
    for i in range(3 * 1024):
        fd = os.open("/dev/null", os.O_RDONLY)
        ino = os.lstat("/proc/self/fd/%d" % fd).st_ino
        os.close(fd)
        try:
            os.lstat("/proc/self/fd/%d" % fd)
        except OSError:
            pass
        if ino % 1024 == 1:
            g = ino - 1
            break
except OSError:
    pass
open("/query/out", "w").write('{"g": %d}' % g)
`

// hostReaderBatches bounds hostCounter's search for a fresh batch.
const hostReaderBatches = 32

// hostCounter reads get_next_ino from the host, through fresh pipes on
// CPU 0, the way inoReceiver does through /proc.
func hostCounter(t testing.TB) int64 {
	t.Helper()
	type res struct {
		g   int64
		err error
	}
	ch := make(chan res, 1)
	go func() {
		// The thread is never unlocked: it exits with the goroutine, so its
		// changed affinity dies with it.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			ch <- res{err: fmt.Errorf("pin to CPU 0: %w", err)}
			return
		}
		// Another task on CPU 0 can take the one allocation that starts a
		// batch; on a loaded host that happens several times in a row, so
		// the reader tries for many batches before it gives up.
		for i := 0; i < hostReaderBatches*inoBatch; i++ {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				ch <- res{err: err}
				return
			}
			var st unix.Stat_t
			err := unix.Fstat(p[0], &st)
			unix.Close(p[0])
			unix.Close(p[1])
			if err != nil {
				ch <- res{err: err}
				return
			}
			if st.Ino%inoBatch == 1 {
				ch <- res{g: int64(st.Ino) - 1}
				return
			}
		}
		ch <- res{err: fmt.Errorf("no fresh inode batch in %d pipes", hostReaderBatches*inoBatch)}
	}()
	r := <-ch
	require.NoError(t, r.err)
	return r.g
}

// hostPush moves the counter from the host as inoSender would from inside.
func hostPush(t testing.TB) {
	t.Helper()
	for i := 0; i < inoPush; i++ {
		f, err := os.Open("/dev/null")
		require.NoError(t, err)
		_, err = os.Stat(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
		require.NoError(t, err)
		fd := f.Fd()
		require.NoError(t, f.Close())
		_, _ = os.Stat(fmt.Sprintf("/proc/self/fd/%d", fd))
	}
}

// secretBits returns n random bits.
func secretBits(t testing.TB, n int) []bool {
	var b [8]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	v := binary.LittleEndian.Uint64(b[:])
	out := make([]bool, n)
	for i := range out {
		out[i] = v>>(i%64)&1 == 1
	}
	return out
}

// chanceMax is the most bits out of 64 a receiver may decode correctly
// while still counting as chance: 32 + 3 standard deviations (4 each),
// about one false alarm in 700 runs.
const chanceMax = 44

func decodeCount(secret []bool, delta []int64) int {
	ok := 0
	for i, d := range delta {
		if (d > inoPush/2) == secret[i] {
			ok++
		}
	}
	return ok
}

// sendBits sends secret through get_next_ino, one bit per pair of
// sequential sandboxes of tpl, and returns the counter's movement per bit as
// the receivers inside saw it and as the host saw it around each sender,
// and how many receivers could read the counter.
func sendBits(t *testing.T, e *testEnv, tpl isolate.Template, secret []bool) (inside, host []int64, readable int) {
	t.Helper()
	read := func() int64 {
		m := decodeOut(t, e.run(t, tpl, inoReceiver))
		return int64(m["g"].(float64))
	}
	prev := read()
	for _, b := range secret {
		h0 := hostCounter(t)
		bit := 0
		if b {
			bit = 1
		}
		decodeOut(t, e.run(t, tpl, fmt.Sprintf(inoSender, bit, inoPush)))
		host = append(host, hostCounter(t)-h0)
		g := read()
		if g >= 0 {
			readable++
		}
		inside = append(inside, g-prev)
		prev = g
	}
	return inside, host, readable
}

// TestProcInodeCounterChannel sends a random 64-bit secret from one sandbox
// to the next through get_next_ino, one bit per pair of sequential
// sandboxes, and decodes it twice: from inside (what a later query would
// learn) and from the host (whether a sandbox can move the counter at all).
// Both must be at chance. Two twins show that the test can fail: a
// host-side sender decoded by the same host reader (the decoder works on
// this machine), and 16 bits through sandboxes with the HostView weakening,
// which mounts /proc as the sandbox did before.
func TestProcInodeCounterChannel(t *testing.T) {
	const bits = 64
	e := newEnv(t)

	control := secretBits(t, bits)
	var cdelta []int64
	for _, b := range control {
		h0 := hostCounter(t)
		if b {
			hostPush(t)
		}
		cdelta = append(cdelta, hostCounter(t)-h0)
	}
	require.Equal(t, bits, decodeCount(control, cdelta), "the host-side control must decode every bit; deltas %v", cdelta)

	weak := e.template(t, "")
	weak.Weaken.HostView = true
	wsecret := secretBits(t, 16)
	in, host, readable := sendBits(t, e, weak, wsecret)
	t.Logf("with /proc (HostView weakening): inside %d/16, host %d/16, readable in %d; deltas inside %v", decodeCount(wsecret, in), decodeCount(wsecret, host), readable, in)
	require.GreaterOrEqual(t, decodeCount(wsecret, in), 15, "the weakened twin must carry the bits, or this test proves nothing")

	secret := secretBits(t, bits)
	in, host, readable = sendBits(t, e, e.template(t, ""), secret)
	nin, nout := decodeCount(secret, in), decodeCount(secret, host)
	t.Logf("get_next_ino channel: receiver inside decodes %d/%d bits (counter readable in %d sandboxes), host reader %d/%d", nin, bits, readable, nout, bits)
	t.Logf("deltas inside %v", in)
	t.Logf("deltas host %v", host)
	assert.Zero(t, readable, "no sandbox may read the proc inode counter")
	assert.LessOrEqual(t, nin, chanceMax, "a later sandbox decodes the secret through get_next_ino")
	assert.LessOrEqual(t, nout, chanceMax, "a sandbox moves get_next_ino through /proc")
}
