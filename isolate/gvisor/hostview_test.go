package gvisor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/hostview"
)

// viewReader reads, from inside, every hostview path the Sentry provides
// (recursively, bounded), the inode numbers of fresh /proc entries, and the
// listing of /proc and /sys. gVisor's /proc/uptime and the btime line of
// /proc/stat are the Sentry's own clocks since boot, not counters: they are
// left out.
const viewReader = `import os, json
PATHS = %s
out = {}
def rd(p, depth=0):
    try:
        if os.path.isdir(p) and not os.path.islink(p):
            if depth < 4:
                for n in sorted(os.listdir(p)):
                    rd(os.path.join(p, n), depth + 1)
            return
        with open(p, "rb") as f:
            text = f.read(65536).decode("latin-1")
        # btime is the wall clock at the Sentry's boot: a clock, not a counter.
        out[p] = "\n".join(l for l in text.split("\n") if not l.startswith("btime "))
    except OSError as e:
        out[p] = "errno %%d" %% e.errno
for p in PATHS:
    if p != "/proc/uptime":
        rd(p)
fds = []
for i in range(64):
    fd = os.open("/dev/null", os.O_RDONLY)
    fds.append(os.lstat("/proc/self/fd/%%d" %% fd).st_ino)
    os.close(fd)
out["ino"] = [os.stat("/proc/self/").st_ino] + fds
out["ls"] = [sorted(os.listdir("/proc")), sorted(os.listdir("/sys"))]
open("/query/out", "w").write(json.dumps(out))
`

// viewSender moves every host-wide counter it can: memory, threads, CPU,
// file writes and fresh /proc lookups.
const viewSender = `import os, threading
b = bytearray(128 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
ts = [threading.Thread(target=lambda: sum(range(1000000))) for _ in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
for i in range(20000):
    fd = os.open("/dev/null", os.O_RDONLY)
    os.lstat("/proc/self/fd/%d" % fd)
    os.close(fd)
with open("/tmp/x", "wb") as f:
    f.write(os.urandom(8 << 20))
open("/query/out", "w").write("{}")
`

// TestSentryViewDoesNotMove shows that under gVisor no sandbox moves what
// the next one reads in /proc and /sys: three sequential readers, one after
// a sender that moved everything it could and one after an idle sandbox,
// read byte-identical files and inode numbers. The Sentry gives each sandbox
// its own procfs and sysfs, so nothing there needs a mask (runsc ignores
// linux.maskedPaths anyway).
func TestSentryViewDoesNotMove(t *testing.T) {
	r := newTestRuntime(t)
	paths, err := json.Marshal(hostview.SandboxMaskPaths())
	require.NoError(t, err)
	reader := fmt.Sprintf(viewReader, paths)
	read := func() map[string]any {
		o := run(t, r, template(t, r, ""), reader)
		require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
		var m map[string]any
		require.NoError(t, json.Unmarshal(o.Output, &m))
		return m
	}
	send := func(script string) {
		o := run(t, r, template(t, r, ""), script)
		require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	}
	first := read()
	send(viewSender)
	afterSender := read()
	send(`open("/query/out", "w").write("{}")`)
	afterIdle := read()
	readable := 0
	for k, v := range first {
		if s, ok := v.(string); ok && s != "" && !strings.HasPrefix(s, "errno ") {
			readable++
		}
		if k == "/proc/meminfo" {
			// The Sentry's meminfo is the reader's own memory, which its
			// own run varies by a page or so (hash randomisation changes
			// its heap); a sender that reached it would move it by the
			// megabytes it allocated.
			assertMeminfoClose(t, v, afterSender[k], "after a sender")
			assertMeminfoClose(t, v, afterIdle[k], "between idle sandboxes")
			continue
		}
		assert.Equal(t, v, afterSender[k], "%s moved after a sender", k)
		assert.Equal(t, v, afterIdle[k], "%s differs between idle sandboxes", k)
	}
	assert.Equal(t, len(first), len(afterSender), "the same paths exist")
	t.Logf("%d paths read, %d with content; inode numbers %v", len(first), readable, first["ino"])
}

// meminfoSlackKB is how far a Sentry meminfo field may differ between two
// readers for reasons of their own: 16 pages.
const meminfoSlackKB = 64

// assertMeminfoClose compares two /proc/meminfo texts field by field, each
// within meminfoSlackKB, with the same fields in the same order.
func assertMeminfoClose(t *testing.T, a, b any, when string) {
	t.Helper()
	as, _ := a.(string)
	bs, _ := b.(string)
	al, bl := strings.Split(as, "\n"), strings.Split(bs, "\n")
	require.Equal(t, len(al), len(bl), "/proc/meminfo has other fields %s", when)
	for i := range al {
		af, bf := strings.Fields(al[i]), strings.Fields(bl[i])
		require.Equal(t, len(af), len(bf), "/proc/meminfo line %d %s", i, when)
		if len(af) < 2 {
			assert.Equal(t, al[i], bl[i])
			continue
		}
		require.Equal(t, af[0], bf[0], "/proc/meminfo field order %s", when)
		x, err1 := strconv.ParseInt(af[1], 10, 64)
		y, err2 := strconv.ParseInt(bf[1], 10, 64)
		require.NoError(t, err1)
		require.NoError(t, err2)
		d := x - y
		if d < 0 {
			d = -d
		}
		assert.LessOrEqual(t, d, int64(meminfoSlackKB), "/proc/meminfo %s moved by %d kB %s", af[0], d, when)
	}
}
