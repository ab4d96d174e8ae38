package isolatetest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// ViewSeed writes a read-only seed of two files, as staging leaves one.
func ViewSeed(t testing.TB) string {
	t.Helper()
	seed := filepath.Join(t.TempDir(), "seed")
	require.NoError(t, os.MkdirAll(filepath.Join(seed, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o444))
	require.NoError(t, os.WriteFile(filepath.Join(seed, "src", "a.py"), []byte("x = 1\n"), 0o444))
	require.NoError(t, os.Chmod(filepath.Join(seed, "src"), 0o555))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(seed, "src"), 0o755) })
	return seed
}

// viewScript reports what an invocation sees of /query/repo (its owner,
// entries, a file, and the mount table's fstype and source there), then
// changes, removes and adds entries for the next invocation not to see.
const viewScript = `import os, json
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

// ViewHooks are a backend's own checks around RepoViewIsPrivatePerInvocation.
type ViewHooks struct {
	// Prepared runs after a prepared sandbox's Prepare, before its Exec.
	Prepared func(t *testing.T, i int)
	// After runs after invocation i, its sandbox destroyed; mount is the
	// fstype and source of /query/repo's line in its mount table.
	After func(t *testing.T, i int, mount [][]string)
}

// RepoViewIsPrivatePerInvocation: sequential invocations over tpl's seed
// (ViewSeed; a prepared one and a cold one, each twice) each see
// /query/repo as the seed, owned by the sandbox user and writable, and none
// sees what an earlier one wrote, changed or removed.
func RepoViewIsPrivatePerInvocation(t *testing.T, rt isolate.Runtime, tpl isolate.Template, h ViewHooks) {
	ctx := context.Background()
	for i, prepared := range []bool{true, false, true, false} {
		var o isolate.Outcome
		if prepared {
			sb, err := rt.Prepare(ctx, tpl)
			require.NoError(t, err)
			// Destroy is idempotent: this one is for a failure below.
			t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
			if h.Prepared != nil {
				h.Prepared(t, i)
			}
			o = sb.Exec(ctx, isolate.Job{InvocationID: "inv-" + RandomID(t)[:8], Script: []byte(viewScript)})
			require.NoError(t, sb.Destroy(ctx))
		} else {
			o = RunScript(t, rt, tpl, viewScript)
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
		if h.After != nil {
			h.After(t, i, got.Mount)
		}
	}
}

// RequireOneView checks a workspace backend's view store after
// RepoViewIsPrivatePerInvocation: one view of the seed for the runtime, in
// a store that only root can enter, under a state directory likewise.
func RequireOneView(t testing.TB, stateDir, runID string) {
	t.Helper()
	store := filepath.Join(stateDir, runID+"-views")
	views, err := filepath.Glob(filepath.Join(store, "views", "*"))
	require.NoError(t, err)
	assert.Len(t, views, 1, "one view of the seed per runtime")
	for _, d := range []string{stateDir, store} {
		st, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "%s", d)
		assert.Zero(t, st.Sys().(*syscall.Stat_t).Uid, "%s is root's", d)
	}
}
