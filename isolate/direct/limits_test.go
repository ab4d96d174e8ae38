package direct_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// TestLimitsGiveTypedOutcomes drives each limit and checks its outcome kind.
func TestLimitsGiveTypedOutcomes(t *testing.T) {
	e := newEnv(t)
	repo := seedRepo(t)
	cases := []struct {
		name   string
		script string
		limits func(*isolate.Limits)
		weaken isolate.Weakening
		want   isolate.Kind
	}{
		{name: "memory", want: isolate.KindOOM,
			limits: func(l *isolate.Limits) { l.MemoryBytes = 64 << 20 },
			script: "b = []\nwhile True:\n    b.append(bytearray(8 << 20))\n"},
		{name: "thread bomb", want: isolate.KindPidsLimit,
			limits: func(l *isolate.Limits) { l.Pids = 16 },
			script: "import threading\nev = threading.Event()\nwhile True:\n    threading.Thread(target=ev.wait, daemon=True).start()\n"},
		{name: "fork is forbidden", want: isolate.KindSeccompKill,
			script: "import os\nwhile True:\n    os.fork()\n"},
		{name: "forbidden syscall", want: isolate.KindSeccompKill,
			script: "import ctypes\nctypes.CDLL(None).unshare(0x10000000)\n"},
		{name: "1 GB write", want: isolate.KindFileSizeLimit,
			script: "c = b'x' * (1 << 20)\nwith open('/query/repo/big', 'wb') as f:\n    for _ in range(1024):\n        f.write(c)\n"},
		{name: "1 GB write, SIGXFSZ default", want: isolate.KindFileSizeLimit,
			limits: func(l *isolate.Limits) { l.FileSizeBytes = 8 << 20 },
			script: "import signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_DFL)\nc = b'x' * (1 << 20)\nwith open('/query/repo/big', 'wb') as f:\n    for _ in range(1024):\n        f.write(c)\n"},
		{name: "sleep past the deadline", want: isolate.KindTimeout,
			limits: func(l *isolate.Limits) { l.Wall = time.Second },
			script: "import time\nwhile True:\n    time.sleep(1)\n"},
		{name: "busy past the deadline", want: isolate.KindTimeout,
			limits: func(l *isolate.Limits) { l.Wall = time.Second; l.CPUMilli = 100 },
			script: "while True:\n    pass\n"},
		{name: "1 GB write to /tmp", want: isolate.KindNonzeroExit,
			script: "c = b'x' * (1 << 20)\nwith open('/tmp/big', 'wb') as f:\n    for _ in range(1024):\n        f.write(c)\n"},
		{name: "nonzero exit", want: isolate.KindNonzeroExit, script: "raise SystemExit(3)\n"},
		{name: "no output", want: isolate.KindOutputMissing, script: "pass\n"},
		{name: "output too large", want: isolate.KindOutputTooLarge,
			script: "open('/query/out', 'w').write('x' * 9000)\n"},
		{name: "output is a directory", want: isolate.KindOutputInvalid,
			script: "import os\nos.mkdir('/query/out')\n"},
		{name: "output is a symlink", want: isolate.KindOutputInvalid, weaken: isolate.Weakening{NoSeccomp: true},
			script: "import os\nos.symlink('/etc/passwd', '/query/out')\n"},
		{name: "output is a fifo", want: isolate.KindOutputInvalid, weaken: isolate.Weakening{NoSeccomp: true},
			script: "import os\nos.mkfifo('/query/out')\n"},
		{name: "ok", want: isolate.KindOK, script: "open('/query/out', 'w').write('{\"a\": 1}')\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tpl := e.template(t, repo)
			if c.limits != nil {
				c.limits(&tpl.Limits)
			}
			tpl.Weaken = c.weaken
			o := e.run(t, tpl, c.script)
			assert.Equal(t, c.want, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
		})
	}
	require.Equal(t, treeDigest(t, repo), treeDigest(t, repo))
}

// TestOutputAndCapture checks the output bytes, the exit code and the
// bounded capture of stdout and stderr.
func TestOutputAndCapture(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	tpl.Limits.CaptureBytes = 1000
	o := e.run(t, tpl, "import sys\nprint('o' * 100000)\nsys.stderr.write('e' * 5000)\nopen('/query/out', 'w').write('[1,2]')\n")
	require.Equal(t, isolate.KindOK, o.Kind, o.Detail)
	assert.Equal(t, "[1,2]", string(o.Output))
	assert.Equal(t, 0, o.ExitCode)
	assert.Equal(t, strings.Repeat("o", 1000), string(o.Stdout))
	assert.Equal(t, strings.Repeat("e", 1000), string(o.Stderr))
}

// TestRepoWritesNeverReachSeed changes, adds and deletes files in the repo
// view and checks the seed is byte-for-byte unchanged.
func TestRepoWritesNeverReachSeed(t *testing.T) {
	e := newEnv(t)
	repo := seedRepo(t)
	before := treeDigest(t, repo)
	script := `import os, json
with open("/query/repo/a.txt", "a") as f:
    f.write("changed\n")
os.remove("/query/repo/sub/b.txt")
os.mkdir("/query/repo/new")
open("/query/repo/new/c.txt", "w").write("new\n")
os.chmod("/query/repo/a.txt", 0o600)
r = {"a": open("/query/repo/a.txt").read(), "ls": sorted(os.listdir("/query/repo")), "sub": os.listdir("/query/repo/sub")}
json.dump(r, open("/query/out", "w"))
`
	m := decodeOut(t, e.run(t, e.template(t, repo), script))
	assert.Equal(t, "seed a\nchanged\n", m["a"])
	assert.Equal(t, []any{"a.txt", "new", "sub"}, m["ls"])
	assert.Empty(t, m["sub"])
	assert.Equal(t, before, treeDigest(t, repo), "the seed changed")

	// A second sandbox over the same seed sees none of the first one's changes.
	m = decodeOut(t, e.run(t, e.template(t, repo), "import os, json\njson.dump({'ls': sorted(os.listdir('/query/repo')), 'a': open('/query/repo/a.txt').read()}, open('/query/out', 'w'))\n"))
	assert.Equal(t, []any{"a.txt", "sub"}, m["ls"])
	assert.Equal(t, "seed a\n", m["a"])
}

// treeDigest hashes every path, mode and content under dir.
func treeDigest(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h.Write([]byte(p + fi.Mode().String() + "\n"))
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}
