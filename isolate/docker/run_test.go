package docker

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/rootfs"
)

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
    'nnp': st.get('NoNewPrivs'), 'seccomp': st.get('Seccomp'),
    'ifaces': sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]),
    'root_writable': writable('/usr/x'), 'tmp_writable': writable('/tmp/x'),
    'script_writable': writable('/awf/query-script.py'),
}
open('/query/out', 'w').write(json.dumps(out))
`

func TestRunTrivialQuery(t *testing.T) {
	r := newTestRuntime(t)
	var pid int
	ctx := context.Background()
	o := r.Run(ctx, isolate.Spec{Template: template(t, r, ""), Job: isolate.Job{
		InvocationID: "trivial", Script: []byte(inspectScript), OnStart: func(p int) { pid = p },
	}})
	require.Equal(t, isolate.KindOK, o.Kind, "detail: %s\nstderr: %s", o.Detail, o.Stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal(o.Output, &got))
	assert.Equal(t, float64(65534), got["uid"])
	assert.Equal(t, float64(65534), got["gid"])
	assert.Equal(t, "/query", got["cwd"])
	assert.Equal(t, "0000000000000000", got["capeff"])
	assert.Equal(t, "0000000000000000", got["capbnd"])
	assert.Equal(t, "1", got["nnp"])
	assert.Equal(t, "2", got["seccomp"])
	assert.Equal(t, []any{"lo"}, got["ifaces"])
	assert.Equal(t, false, got["root_writable"])
	assert.Equal(t, true, got["tmp_writable"])
	assert.Equal(t, false, got["script_writable"])
	_, err := rootfs.Verify(context.Background(), testRoot, testRootDigest)
	assert.NoError(t, err, "the shared rootfs must not change")
	assert.Positive(t, pid, "OnStart gets the job's host pid")
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
			limits: func(l *isolate.Limits) { l.MemoryBytes = 64 << 20 },
			script: "b = []\nwhile True:\n    b.append(bytearray(8 << 20))\n"},
		{name: "thread bomb", want: isolate.KindPidsLimit,
			limits: func(l *isolate.Limits) { l.Pids = 16 },
			script: "import threading\nev = threading.Event()\nwhile True:\n    threading.Thread(target=ev.wait, daemon=True).start()\n"},
		{name: "fork is forbidden", want: isolate.KindSeccompKill,
			script: "import os\nwhile True:\n    os.fork()\n"},
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
		{name: "output is a fifo", want: isolate.KindOutputInvalid, weaken: isolate.Weakening{NoSeccomp: true},
			script: "import os\nos.mkfifo('/query/out')\n"},
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
	script := `import os, json
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

func TestNilPolicyFailsClosed(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	tpl.Policy = nil
	o := run(t, r, tpl, "open('/query/out','w').write('1')\n")
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	assert.Contains(t, o.Detail, "policy")
}

func TestFailClosedWithoutDaemon(t *testing.T) {
	notSocket := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notSocket, nil, 0o600))
	// A socket file nobody listens on any more.
	dead := filepath.Join(t.TempDir(), "dead.sock")
	l, err := net.Listen("unix", dead)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	for _, sock := range []string{"", "/nonexistent/docker.sock", notSocket, "tcp://127.0.0.1:2375", "relative.sock", dead} {
		r, err := New(isolate.HostConfig{RunID: randomID(t), StateDir: t.TempDir(), DockerSocket: sock})
		require.NoError(t, err)
		perr := r.Probe(context.Background())
		require.Error(t, perr, sock)
		assert.Contains(t, perr.Error(), "sock", sock)
		o := r.Run(context.Background(), isolate.Spec{Template: isolate.Template{RunID: "x", RootFS: testRoot, Limits: isolate.DefaultLimits()}})
		assert.Equal(t, isolate.KindLaunchFailed, o.Kind, sock)
	}
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
