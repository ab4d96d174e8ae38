package gvisor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/rootfs"
)

func run(t *testing.T, r *Runtime, tpl isolate.Template, script string) isolate.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "inv-" + randomID(t)[:8], Script: []byte(script)}})
}

const inspectScript = `import json, os
st = {}
for line in open('/proc/self/status'):
    k, _, v = line.partition(':')
    st[k] = v.strip()
def writable(p):
    try:
        open(p, 'w').close()
        return True
    except OSError:
        return False
out = {
    'uid': os.getuid(), 'gid': os.getgid(), 'cwd': os.getcwd(),
    'capeff': st.get('CapEff'), 'capbnd': st.get('CapBnd'),
    'ifaces': sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]),
    'root_writable': writable('/usr/x'), 'tmp_writable': writable('/tmp/x'),
    'script_writable': writable('/awf/query-script.py'),
    'query': sorted(os.listdir('/query')),
}
open('/query/out', 'w').write(json.dumps(out))
`

func TestRunTrivialQuery(t *testing.T) {
	r := newTestRuntime(t)
	o := run(t, r, template(t, r, ""), inspectScript)
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Equal(t, float64(65534), got["uid"])
	assert.Equal(t, float64(65534), got["gid"])
	assert.Equal(t, "/query", got["cwd"])
	assert.Equal(t, "0000000000000000", got["capeff"])
	assert.Equal(t, "0000000000000000", got["capbnd"])
	assert.Equal(t, []any{"lo"}, got["ifaces"])
	assert.Equal(t, false, got["root_writable"])
	assert.Equal(t, true, got["tmp_writable"])
	assert.Equal(t, false, got["script_writable"])
	_, err := rootfs.Verify(context.Background(), testRoot, testRootDigest)
	assert.NoError(t, err, "the shared rootfs must not change")
	assert.Equal(t, 0, o.ExitCode)
	assert.NotZero(t, o.Timings.Run)
	assert.NotZero(t, o.Timings.Destroy)
}

func TestLimitsGiveTypedOutcomes(t *testing.T) {
	r := newTestRuntime(t)
	cases := []struct {
		name   string
		script string
		limits func(*isolate.Limits)
		weaken isolate.Weakening
		want   isolate.Kind
		stderr string // when set, stderr must contain it
	}{
		{name: "memory", want: isolate.KindOOM,
			limits: func(l *isolate.Limits) { l.MemoryBytes = 128 << 20 },
			script: "b = []\nwhile True:\n    b.append(bytearray(8 << 20))\n"},
		{name: "thread bomb", want: isolate.KindPidsLimit,
			limits: func(l *isolate.Limits) { l.Pids = 16 },
			script: "import threading\nev = threading.Event()\nwhile True:\n    threading.Thread(target=ev.wait, daemon=True).start()\n"},
		{name: "file size", want: isolate.KindFileSizeLimit,
			limits: func(l *isolate.Limits) { l.FileSizeBytes = 8 << 20 },
			script: "c = b'x' * (1 << 20)\nwith open('/query/big', 'wb') as f:\n    for _ in range(32):\n        f.write(c)\n"},
		{name: "sleep past the deadline", want: isolate.KindTimeout,
			limits: func(l *isolate.Limits) { l.Wall = time.Second },
			script: "import time\nwhile True:\n    time.sleep(1)\n"},
		{name: "nonzero exit", want: isolate.KindNonzeroExit, script: "raise SystemExit(3)\n"},
		{name: "tmp is size-capped", want: isolate.KindNonzeroExit, stderr: "No space left on device",
			limits: func(l *isolate.Limits) { l.TmpTmpfsBytes = 4 << 20 },
			script: "c = b'x' * (1 << 20)\nwith open('/tmp/big', 'wb') as f:\n    for _ in range(8):\n        f.write(c)\n        f.flush()\n"},
		{name: "query is size-capped", want: isolate.KindNonzeroExit, stderr: "No space left on device",
			limits: func(l *isolate.Limits) { l.QueryTmpfsBytes = 4 << 20 },
			script: "c = b'x' * (1 << 20)\nwith open('/query/big', 'wb') as f:\n    for _ in range(8):\n        f.write(c)\n        f.flush()\n"},
		{name: "no output", want: isolate.KindOutputMissing, script: "pass\n"},
		{name: "output too large", want: isolate.KindOutputTooLarge,
			script: "open('/query/out', 'w').write('x' * 9000)\n"},
		{name: "output is a directory", want: isolate.KindOutputInvalid,
			script: "import os\nos.mkdir('/query/out')\n"},
		{name: "output is a symlink", want: isolate.KindOutputInvalid, weaken: isolate.Weakening{NoSeccomp: true},
			script: "import os\nos.symlink('/etc/passwd', '/query/out')\n"},
		// The Sentry keeps a FIFO made in a gofer mount to itself: the host
		// sees no file at all.
		{name: "output is a fifo", want: isolate.KindOutputMissing, weaken: isolate.Weakening{NoSeccomp: true},
			script: "import os\nos.mkfifo('/query/out')\n"},
		{name: "fork is forbidden", want: isolate.KindSeccompKill,
			script: "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tpl := template(t, r, "")
			if c.limits != nil {
				c.limits(&tpl.Limits)
			}
			tpl.Weaken = c.weaken
			o := run(t, r, tpl, c.script)
			assert.Equal(t, c.want, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
			assert.Nil(t, o.Output)
			if c.stderr != "" {
				assert.Contains(t, string(o.Stderr), c.stderr)
			}
		})
	}
	require.NoError(t, r.Usable())
}

func TestRepoWritesNeverReachTheSeed(t *testing.T) {
	r := newTestRuntime(t)
	seed := filepath.Join(t.TempDir(), "seed")
	require.NoError(t, os.MkdirAll(filepath.Join(seed, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o444))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "src", "a.py"), []byte("x = 1\n"), 0o444))
	require.NoError(t, os.Symlink("README", filepath.Join(seed, "link")))
	before := snapshot(t, seed)

	script := `import os, json, shutil
r = '/query/repo'
seen = sorted(os.listdir(r))
readme = open(r + '/README').read()
open(r + '/README', 'w').write('changed')
os.remove(r + '/src/a.py')
open(r + '/new', 'w').write('new')
os.remove(r + '/link')
open('/query/out', 'w').write(json.dumps({'seen': seen, 'readme': readme, 'after': sorted(os.listdir(r))}))
`
	o := run(t, r, template(t, r, seed), script)
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	var got struct {
		Seen   []string `json:"seen"`
		Readme string   `json:"readme"`
		After  []string `json:"after"`
	}
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Equal(t, []string{"README", "link", "src"}, got.Seen)
	assert.Equal(t, "hello\n", got.Readme)
	assert.Equal(t, []string{"README", "new", "src"}, got.After)
	assert.Equal(t, before, snapshot(t, seed), "the seed changed")
}

// snapshot maps every path under dir to its mode and content or link target.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		m[rel] = v
		return nil
	}))
	return m
}

func TestNilPolicyFailsClosed(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	tpl.Policy = nil
	o := run(t, r, tpl, "open('/query/out','w').write('1')\n")
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	assert.Contains(t, o.Detail, "policy")
}

func TestSandboxIsSingleUseAndDestroyIsIdempotent(t *testing.T) {
	r := newTestRuntime(t)
	ctx := context.Background()
	sb, err := r.Prepare(ctx, template(t, r, ""))
	require.NoError(t, err)
	o := sb.Exec(ctx, isolate.Job{InvocationID: "one", Script: []byte("open('/query/out','w').write('1')\n")})
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	assert.Equal(t, []byte("1"), o.Output)
	o = sb.Exec(ctx, isolate.Job{InvocationID: "two", Script: []byte("pass\n")})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	require.NoError(t, sb.Destroy(ctx))
	require.NoError(t, sb.Destroy(ctx))
	requireNoLeftovers(t, r)
}
