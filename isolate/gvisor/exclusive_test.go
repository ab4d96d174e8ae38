package gvisor

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/isolate/trial"
	"github.com/awf-project/awf/isolate/workspace"
)

// TestRenderHintsExclusiveBinds: the bundle marks the /query and
// /query/repo binds, and only them, as used by this container alone (see
// hintExclusive); an enclave's bundle has no hint.
func TestRenderHintsExclusiveBinds(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, isolatetest.ViewSeed(t))
	desc, err := trial.Describe(tpl, nil, "")
	require.NoError(t, err)
	ws := &workspace.Workspace{Dir: "/state/ws", Journal: workspace.Journal{Repo: tpl.Repo}}
	spec, err := buildSpec(bundleSpec{desc: desc, rootFS: "/state/ws/root", ws: ws, cgroup: "awf/x", runID: "render", invID: "inv", sandbox: "sb"})
	require.NoError(t, err)
	hints := map[string]string{}
	for k, v := range spec.Annotations {
		if name, ok := strings.CutPrefix(k, mountHintPrefix); ok {
			hints[name] = v
		}
	}
	assert.Equal(t, map[string]string{
		"awf-query.source": ws.QueryDir(), "awf-query.type": "bind", "awf-query.share": "container",
		"awf-repo.source": ws.RepoDir(), "awf-repo.type": "bind", "awf-repo.share": "container",
	}, hints)
	for _, m := range spec.Mounts {
		if m.Destination == isolate.ScriptDir {
			assert.NotContains(t, slices.Collect(maps.Values(hints)), m.Source, "the script directory is written while a prepared sandbox waits")
		}
	}
	dropMountHints(spec.Annotations)
	for k := range spec.Annotations {
		assert.NotContains(t, k, mountHintPrefix)
	}
	assert.Equal(t, "render", spec.Annotations[annotationRun])
}

// writeThroughScript changes the repository (a new file, an appended one,
// a rename, a directory removed) and checks what it reads back, then
// writes its answer through a shared mapping that it never unmaps or
// syncs, and exits without any cleanup.
const writeThroughScript = `import os, mmap
r = "/query/repo"
open(r + "/new.txt", "w").write("abc")
assert open(r + "/new.txt").read() == "abc"
with open(r + "/README", "ab") as f:
    f.write(b"more\n")
assert open(r + "/README").read() == "hello\nmore\n"
os.rename(r + "/new.txt", r + "/src/moved.txt")
assert sorted(os.listdir(r + "/src")) == ["a.py", "moved.txt"], os.listdir(r + "/src")
os.mkdir(r + "/d")
os.rmdir(r + "/d")
assert not os.path.exists(r + "/d")
fd = os.open("/query/out", os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 16)
m = mmap.mmap(fd, 16)
m[:] = b'{"n": 42}       '
os._exit(0)
`

// TestExclusiveBindsWriteThrough: runsc honours the hints (its debug log
// shows /query and /query/repo mounted without revalidation, /awf with it),
// and with /query and /query/repo exclusive to the Sentry, what a job writes is on the host when the broker reads it,
// cold and prepared: its answer, even one written only through a mapping,
// and its repository changes in its own upper layer. A job that only
// reads the repository (a tree walk, as the benchmark's) writes nothing
// to the upper layer: the Sentry writes back no access time.
func TestExclusiveBindsWriteThrough(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, isolatetest.ViewSeed(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := []byte(`{"n": 42}       `)

	logs := t.TempDir()
	r.debugArgs = []string{"--debug", "--debug-log=" + logs + "/"}
	o := r.Run(ctx, isolate.Spec{Template: tpl, Job: isolate.Job{InvocationID: "cold", Script: []byte(writeThroughScript)}})
	r.debugArgs = nil
	require.Equal(t, isolate.KindOK, o.Kind, "%s %s", o.Detail, o.Stderr)
	assert.Equal(t, want, o.Output, "cold")
	boot, err := filepath.Glob(filepath.Join(logs, "*.boot.txt"))
	require.NoError(t, err)
	require.Len(t, boot, 1)
	b, err := os.ReadFile(boot[0])
	require.NoError(t, err)
	caches := map[string]string{}
	for _, m := range regexp.MustCompile(`Mounted "[^"]*" to "([^"]*)" type: bind, internal-options: "([^"]*)"`).FindAllSubmatch(b, -1) {
		caches[string(m[1])] = regexp.MustCompile(`cache=[a-z_]+`).FindString(string(m[2]))
	}
	assert.Equal(t, map[string]string{isolate.QueryDir: "", isolate.RepoDir: "", isolate.ScriptDir: "cache=remote_revalidating"}, caches)

	// prepared runs the script in a prepared sandbox and returns the
	// outcome and the host paths of its upper layer, listed before Destroy.
	prepared := func(inv, script string) (isolate.Outcome, []string) {
		sb, err := r.Prepare(ctx, tpl)
		require.NoError(t, err)
		o := sb.Exec(ctx, isolate.Job{InvocationID: inv, Script: []byte(script)})
		upper := filepath.Join(sb.(*sandbox).ws.Dir, "repofs", "upper")
		var got []string
		werr := filepath.Walk(upper, func(p string, _ os.FileInfo, err error) error {
			if err == nil && p != upper {
				rel, _ := filepath.Rel(upper, p)
				got = append(got, rel)
			}
			return err
		})
		require.NoError(t, sb.Destroy(ctx))
		require.NoError(t, werr)
		require.Equal(t, isolate.KindOK, o.Kind, "%s: %s %s", inv, o.Detail, o.Stderr)
		return o, got
	}
	o, upper := prepared("prepared", writeThroughScript)
	assert.Equal(t, want, o.Output, "prepared")
	assert.ElementsMatch(t, []string{"README", "src", "src/moved.txt"}, upper, "the job's changes are in its upper layer")

	o, upper = prepared("walk", `import os, hashlib
h = hashlib.sha256()
for root, dirs, files in os.walk("/query/repo"):
    dirs.sort()
    for name in sorted(files):
        with open(os.path.join(root, name), "rb") as f:
            h.update(f.read())
        os.stat(os.path.join(root, name))
open("/query/out", "w").write('"%s"' % h.hexdigest()[:8])
`)
	assert.Len(t, o.Output, 10)
	assert.Empty(t, upper, "a read-only walk copies nothing up")
}
