package docker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

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

// TestRepoViewIsPrivatePerInvocation: the shared case
// (isolatetest.RepoViewIsPrivatePerInvocation), seen through the host
// overlay (not the empty directory under it); once each container is
// removed no process on the host has a mount of its overlay; the runtime
// keeps one view of the seed for all of them, in a store that only root
// can enter.
func TestRepoViewIsPrivatePerInvocation(t *testing.T) {
	r := newTestRuntime(t)
	isolatetest.RepoViewIsPrivatePerInvocation(t, r, template(t, r, isolatetest.ViewSeed(t)), isolatetest.ViewHooks{
		// The positive control of the leak check below.
		Prepared: func(t *testing.T, i int) {
			require.NotEmpty(t, repoOverlaysUnder(t, r.dir), "invocation %d: the prepared sandbox's overlay is in the host's table", i)
		},
		After: func(t *testing.T, i int, mount [][]string) {
			assert.Equal(t, [][]string{{"overlay", "awf-repo"}}, mount, "invocation %d: /query/repo is the host overlay", i)
			assert.Empty(t, repoOverlaysUnder(t, r.dir), "invocation %d: repo overlays left after the sandbox was destroyed", i)
		},
	})
	isolatetest.RequireOneView(t, r.dir, r.runID)
}

// TestRepoUpperIsSizeCapped: the writes of one invocation go to its own
// upper layer, on a tmpfs of Limits.RepoUpperBytes: a write past it fails
// inside with ENOSPC, within the cap; the next invocation has the whole
// cap again.
func TestRepoUpperIsSizeCapped(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, isolatetest.ViewSeed(t))
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
		return template(t, r, isolatetest.ViewSeed(t))
	}
	isolatetest.SweepRemovesWhatACrashLeft(t, b)
	assert.Empty(t, repoOverlaysUnder(t, dir), "repo overlays left after the sweep")
}
