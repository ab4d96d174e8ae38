package gvisor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

// TestRepoViewIsPrivatePerInvocation: sequential invocations over one seed
// (a prepared one and a cold one, each twice) each see /query/repo as the
// seed, owned by the sandbox user and writable, and none sees what an
// earlier one wrote, changed or removed; the runtime keeps one view of
// the seed for all of them.
func TestRepoViewIsPrivatePerInvocation(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, viewSeed(t))
	script := `import os, json
r = '/query/repo'
st = os.stat(r)
got = {'uid': st.st_uid, 'seen': sorted(os.listdir(r)), 'src': sorted(os.listdir(r + '/src')), 'readme': open(r + '/README').read()}
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
			o = sb.Exec(ctx, isolate.Job{InvocationID: "inv-" + isolatetest.RandomID(t)[:8], Script: []byte(script)})
			require.NoError(t, sb.Destroy(ctx))
		} else {
			o = run(t, r, tpl, script)
		}
		require.Equal(t, isolate.KindOK, o.Kind, "invocation %d: %s\nstderr: %s", i, o.Detail, o.Stderr)
		var got struct {
			UID    int      `json:"uid"`
			Seen   []string `json:"seen"`
			Src    []string `json:"src"`
			Readme string   `json:"readme"`
		}
		require.NoError(t, json.Unmarshal(o.Output, &got))
		assert.Equal(t, isolate.SandboxUID, got.UID, "invocation %d", i)
		assert.Equal(t, []string{"README", "src"}, got.Seen, "invocation %d", i)
		assert.Equal(t, []string{"a.py"}, got.Src, "invocation %d", i)
		assert.Equal(t, "hello\n", got.Readme, "invocation %d", i)
	}
	views, err := filepath.Glob(filepath.Join(r.dir, r.runID+"-views", "views", "*"))
	require.NoError(t, err)
	assert.Len(t, views, 1, "one view of the seed per runtime")
}

// TestSweepRemovesViewsACrashLeft is TestSweepRemovesWhatACrashLeft over a
// seed: the crashed runtime's view store and its sandboxes' overlays go
// too.
func TestSweepRemovesViewsACrashLeft(t *testing.T) {
	b := backend
	b.Template = func(t testing.TB, r *Runtime, _ string) isolate.Template { return template(t, r, viewSeed(t)) }
	isolatetest.SweepRemovesWhatACrashLeft(t, b)
}
