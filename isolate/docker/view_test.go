package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// viewSeed writes a read-only seed of two files.
func viewSeed(t testing.TB) string {
	t.Helper()
	seed := filepath.Join(t.TempDir(), "seed")
	require.NoError(t, os.MkdirAll(filepath.Join(seed, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o444))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "src", "a.py"), []byte("x = 1\n"), 0o444))
	require.NoError(t, os.Chmod(filepath.Join(seed, "src"), 0o555))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(seed, "src"), 0o755) })
	return seed
}

// repoOverlaysUnder lists, from the mount table of every process on the
// host (the broker's, the Engine's, containerd's and its shims', and any
// other namespace a container's mounts could have leaked into), the repo
// overlays (source awf-repo) mounted below dir.
func repoOverlaysUnder(t testing.TB, dir string) []string {
	t.Helper()
	tables, err := filepath.Glob("/proc/[0-9]*/mountinfo")
	require.NoError(t, err)
	seen := map[string]bool{}
	var out []string
	for _, p := range tables {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			f := strings.Fields(line)
			if len(f) < 5 || !strings.HasPrefix(f[4], dir+"/") {
				continue
			}
			if _, post, ok := strings.Cut(line, " - "); ok && strings.Contains(" "+post+" ", " awf-repo ") {
				if key := p + " " + f[4]; !seen[key] {
					seen[key] = true
					out = append(out, key)
				}
			}
		}
	}
	return out
}

// TestRepoViewIsPrivatePerInvocation: sequential invocations over one seed
// (a prepared one and a cold one, each twice) each see /query/repo as the
// seed, through the host overlay (not the empty directory under it), owned
// by the sandbox user and writable, and none sees what an earlier one
// wrote, changed or removed; once each container is removed no process on
// the host has a mount of its overlay; the runtime keeps one view of the
// seed for all of them, in a store that only root can enter.
func TestRepoViewIsPrivatePerInvocation(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, viewSeed(t))
	script := `import os, json
r = '/query/repo'
st = os.stat(r)
mnt = [l.split(' - ', 1)[1].split()[:2] for l in open('/proc/self/mountinfo') if l.split()[4] == r]
got = {'uid': st.st_uid, 'seen': sorted(os.listdir(r)), 'src': sorted(os.listdir(r + '/src')), 'readme': open(r + '/README').read(), 'mount': mnt}
open(r + '/README', 'w').write('changed')
os.remove(r + '/src/a.py')
open(r + '/new', 'w').write('new')
os.mkdir(r + '/dir')
open('/query/out', 'w').write(json.dumps(got))
`
	ctx := context.Background()
	for i, prepared := range []bool{true, false, true, false} {
		var o isolate.Outcome
		if prepared {
			sb, err := r.Prepare(ctx, tpl)
			require.NoError(t, err)
			// Destroy is idempotent: this one is for a failure below.
			t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
			// The positive control of the leak check below.
			require.NotEmpty(t, repoOverlaysUnder(t, r.dir), "invocation %d: the prepared sandbox's overlay is in the host's table", i)
			o = sb.Exec(ctx, isolate.Job{InvocationID: "inv-" + isolatetest.RandomID(t)[:8], Script: []byte(script)})
			require.NoError(t, sb.Destroy(ctx))
		} else {
			o = run(t, r, tpl, script)
		}
		require.Equal(t, isolate.KindOK, o.Kind, "invocation %d: %s\nstderr: %s", i, o.Detail, o.Stderr)
		var got struct {
			UID    int        `json:"uid"`
			Seen   []string   `json:"seen"`
			Src    []string   `json:"src"`
			Readme string     `json:"readme"`
			Mount  [][]string `json:"mount"`
		}
		require.NoError(t, json.Unmarshal(o.Output, &got))
		assert.Equal(t, isolate.SandboxUID, got.UID, "invocation %d", i)
		assert.Equal(t, []string{"README", "src"}, got.Seen, "invocation %d", i)
		assert.Equal(t, []string{"a.py"}, got.Src, "invocation %d", i)
		assert.Equal(t, "hello\n", got.Readme, "invocation %d", i)
		assert.Equal(t, [][]string{{"overlay", "awf-repo"}}, got.Mount, "invocation %d: /query/repo is the host overlay", i)
		assert.Empty(t, repoOverlaysUnder(t, r.dir), "invocation %d: repo overlays left after the sandbox was destroyed", i)
	}
	store := filepath.Join(r.dir, r.runID+"-views")
	views, err := filepath.Glob(filepath.Join(store, "views", "*"))
	require.NoError(t, err)
	assert.Len(t, views, 1, "one view of the seed per runtime")
	for _, d := range []string{r.dir, store} {
		st, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "%s", d)
		assert.Zero(t, st.Sys().(*syscall.Stat_t).Uid, "%s is root's", d)
	}
}

// TestRepoUpperIsSizeCapped: the writes of one invocation go to its own
// upper layer, on a tmpfs of Limits.RepoUpperBytes: a write past it fails
// inside with ENOSPC, within the cap; the next invocation has the whole
// cap again.
func TestRepoUpperIsSizeCapped(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, viewSeed(t))
	tpl.Limits.RepoUpperBytes = 4 << 20
	script := `import errno, json, os
c = b'x' * (1 << 20)
n, err = 0, None
try:
    with open('/query/repo/big', 'wb') as f:
        for _ in range(8):
            f.write(c)
            f.flush()
            os.fsync(f.fileno())
            n += len(c)
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
open('/query/out', 'w').write(json.dumps({'err': err, 'written': n}))
`
	for i := range 2 {
		o := run(t, r, tpl, script)
		require.Equal(t, isolate.KindOK, o.Kind, "invocation %d: %s\nstderr: %s", i, o.Detail, o.Stderr)
		var got struct {
			Err     string `json:"err"`
			Written int64  `json:"written"`
		}
		require.NoError(t, json.Unmarshal(o.Output, &got))
		assert.Equal(t, "ENOSPC", got.Err, "invocation %d", i)
		assert.LessOrEqual(t, got.Written, tpl.Limits.RepoUpperBytes, "invocation %d", i)
		assert.GreaterOrEqual(t, got.Written, int64(2<<20), "invocation %d: the upper had its whole cap", i)
	}
}

// TestSweepRemovesViewsACrashLeft is TestSweepRemovesWhatACrashLeft over a
// seed: the crashed runtime's view store and its sandboxes' overlays go
// too.
func TestSweepRemovesViewsACrashLeft(t *testing.T) {
	b := backend
	var dir string
	b.Template = func(t testing.TB, r *Runtime, _ string) isolate.Template {
		dir = r.dir
		return template(t, r, viewSeed(t))
	}
	isolatetest.SweepRemovesWhatACrashLeft(t, b)
	assert.Empty(t, repoOverlaysUnder(t, dir), "repo overlays left after the sweep")
}
