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
)

// observeScript prints what a script can see of how it was started: the
// loaded modules (before it imports anything), its argv, flags and path,
// its __main__, environment, directory, limits, ids, umask, open
// descriptors and the script file. Host pipe inode numbers are blanked:
// they differ between any two runs.
const observeScript = `import sys
mods = sorted(sys.modules)
import os, re, resource, json
limits = {n: resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_")}
um = os.umask(0)
os.umask(um)
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        fds[fd] = re.sub(r"[0-9]+", "N", os.readlink("/proc/self/fd/" + fd))
    except OSError as e:
        fds[fd] = "error %d" % e.errno
st = os.stat(__file__)
obs = {
    "modules": mods, "argv": sys.argv, "orig_argv": sys.orig_argv, "flags": str(sys.flags),
    "path": sys.path, "main": sorted(k for k in globals() if k not in ("mods", "limits", "um", "fds", "fd", "st", "obs", "os", "re", "resource", "json", "sys")),
    "name": __name__, "file": __file__, "spec": repr(__spec__), "loader": type(__loader__).__name__,
    "env": dict(os.environ), "cwd": os.getcwd(), "limits": limits,
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())],
    "umask": um, "fds": fds, "pid": os.getpid(), "ppid": os.getppid(),
    "stdin": os.read(0, 16).decode(), "script": [oct(st.st_mode), st.st_uid, st.st_size, os.access(__file__, os.W_OK)],
    "awf": sorted(os.listdir("/awf")),
}
open("/query/out", "w").write(json.dumps(obs, sort_keys=True))
`

// TestPreparedLongBeforeIsIndistinguishable runs the observation script
// in a sandbox prepared well before its Exec and through Run, and requires
// the same observations: a script cannot tell a pooled sandbox from a cold
// one.
func TestPreparedLongBeforeIsIndistinguishable(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := isolate.Job{InvocationID: "observe", Script: []byte(observeScript)}

	sb, err := r.Prepare(ctx, tpl)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	// Longer than any boot here: whatever the sandbox does on its own
	// has happened.
	time.Sleep(3 * time.Second)
	warm := sb.Exec(ctx, job)
	require.NoError(t, sb.Destroy(ctx))
	cold := r.Run(ctx, isolate.Spec{Template: tpl, Job: job})

	for _, o := range []isolate.Outcome{warm, cold} {
		require.Equal(t, isolate.KindOK, o.Kind, "%s\nstderr: %s", o.Detail, o.Stderr)
	}
	var w, c map[string]any
	require.NoError(t, json.Unmarshal(warm.Output, &w))
	require.NoError(t, json.Unmarshal(cold.Output, &c))
	assert.Equal(t, c, w)
	// The observations are the script's own, as python3 would run it.
	assert.Equal(t, []any{isolate.ScriptPath}, w["argv"])
	assert.Equal(t, "__main__", w["name"])
	assert.Equal(t, []any{filepath.Base(isolate.ScriptPath)}, w["awf"])
	assert.Equal(t, "", w["stdin"])
	assert.Equal(t, []any{"0o100444", float64(0), float64(len(observeScript)), false}, w["script"])
	t.Logf("observed: %s", warm.Output)
}

// TestPreparedSandboxHoldsNothingAfterDestroy destroys a booted sandbox
// that never ran a job: runsc, its state, the cgroup and every mount go.
func TestPreparedSandboxHoldsNothingAfterDestroy(t *testing.T) {
	r := newTestRuntime(t)
	ctx := context.Background()
	seed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(seed, "a.txt"), []byte("a\n"), 0o444))
	sb, err := r.Prepare(ctx, template(t, r, seed))
	require.NoError(t, err)
	s := sb.(*sandbox)
	require.True(t, s.booted)
	m, err := filepath.Glob(filepath.Join(s.ws.Path("runsc"), "*.state"))
	require.NoError(t, err)
	require.Len(t, m, 1, "the prepared sandbox runs")
	require.NoError(t, sb.Destroy(ctx))
	_, err = os.Stat(s.ws.Dir)
	assert.ErrorIs(t, err, os.ErrNotExist)
	requireNoLeftovers(t, r)
}

// TestPreparedSandboxRunsAnotherArgvCold gives a booted sandbox a job with
// its own argv: it runs in a fresh sandbox started for that argv.
func TestPreparedSandboxRunsAnotherArgvCold(t *testing.T) {
	r := newTestRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := r.Prepare(ctx, template(t, r, ""))
	require.NoError(t, err)
	o := sb.Exec(ctx, isolate.Job{InvocationID: "argv", Argv: []string{"/usr/bin/python3", "-I", "-S", "-B", "-c",
		"import sys; open('/query/out', 'w').write(repr(sys.argv))", "x"}})
	require.NoError(t, sb.Destroy(ctx))
	require.Equal(t, isolate.KindOK, o.Kind, "%s\nstderr: %s", o.Detail, o.Stderr)
	assert.Equal(t, "['-c', 'x']", string(o.Output))
	requireNoLeftovers(t, r)
}

// TestPreparedWallLimitCountsFromExec prepares a sandbox, waits longer
// than its wall-clock limit, and then runs a job well within it.
func TestPreparedWallLimitCountsFromExec(t *testing.T) {
	r := newTestRuntime(t)
	tpl := template(t, r, "")
	tpl.Limits.Wall = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := r.Prepare(ctx, tpl)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	time.Sleep(tpl.Limits.Wall + time.Second)
	o := sb.Exec(ctx, isolate.Job{InvocationID: "wall", Script: []byte("open('/query/out', 'w').write('1')\n")})
	require.NoError(t, sb.Destroy(ctx))
	assert.Equal(t, isolate.KindOK, o.Kind, "%s\nstderr: %s", o.Detail, o.Stderr)
}
