package direct_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestPreparedAheadLooksCold runs isolatetest's observation script
// (loaded modules, argv, descriptors, environment, cwd, rlimits,
// credentials, umask, signal dispositions, sys.flags, mounts and more) in
// a sandbox whose interpreter has waited for it, and in a cold run, and
// wants the same observations from both.
func TestPreparedAheadLooksCold(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, seedRepo(t))
	got := isolatetest.PreparedLooksCold(t, e.rt, tpl, func() {
		// The interpreter has loaded everything and waits; then it waits more.
		waitBootstrapBlocked(t, e.runID)
		time.Sleep(time.Second)
	})
	e.assertIdle(t)

	// And what both see is a cold interpreter's view of its script.
	var obs struct {
		Modules  []string `json:"modules"`
		Argv     []string `json:"argv"`
		File     string   `json:"file"`
		Name     string   `json:"name"`
		OrigArgv []string `json:"orig_argv"`
		FDs      [][]any  `json:"fds"`
		Globals  []string `json:"globals"`
	}
	require.NoError(t, json.Unmarshal(got, &obs))
	assert.Contains(t, obs.Modules, "json", "the bootstrap preloads json")
	assert.Equal(t, []string{isolate.ScriptPath}, obs.Argv)
	assert.Equal(t, isolate.DefaultArgv(), obs.OrigArgv)
	assert.Equal(t, isolate.ScriptPath, obs.File)
	assert.Equal(t, "__main__", obs.Name)
	assert.Len(t, obs.FDs, 3, "only stdio is open: %v", obs.FDs)
	assert.Equal(t, []string{"__annotations__", "__builtins__", "__cached__", "__doc__", "__file__",
		"__loader__", "__name__", "__package__", "__spec__", "modules", "sys"}, obs.Globals)
}

// TestIdlePreparedSandboxOutlivesWall: the wall-clock deadline runs from
// Exec, so a sandbox that waits longer than it is still usable, and a job
// that runs longer than it still times out.
func TestIdlePreparedSandboxOutlivesWall(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	tpl.Limits.Wall = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		script string
		kind   isolate.Kind
	}{{okScript, isolate.KindOK}, {"import time\ntime.sleep(30)\n", isolate.KindTimeout}} {
		sb, err := e.rt.Prepare(ctx, tpl)
		require.NoError(t, err)
		waitBootstrapBlocked(t, e.runID)
		time.Sleep(2 * tpl.Limits.Wall)
		o := sb.Exec(ctx, isolate.Job{InvocationID: "idle", Script: []byte(c.script)})
		require.NoError(t, sb.Destroy(ctx))
		assert.Equal(t, c.kind, o.Kind, "%s: %s", o.Detail, o.Stderr)
	}
	e.assertIdle(t)
}

// TestPreparedScriptErrorsLookCold: tracebacks name the script's path and
// show no frame of the bootstrap; exit statuses pass through.
func TestPreparedScriptErrorsLookCold(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	o := e.run(t, tpl, "def f():\n    raise ValueError('no')\n\nf()\n")
	require.Equal(t, isolate.KindNonzeroExit, o.Kind)
	assert.Equal(t, 1, o.ExitCode)
	assert.Equal(t, "Traceback (most recent call last):\n"+
		"  File \""+isolate.ScriptPath+"\", line 4, in <module>\n    f()\n"+
		"  File \""+isolate.ScriptPath+"\", line 2, in f\n    raise ValueError('no')\nValueError: no\n", string(o.Stderr))
	o = e.run(t, tpl, "raise SystemExit(7)\n")
	assert.Equal(t, 7, o.ExitCode)
	assert.Empty(t, o.Stderr)
}

// waitBootstrapBlocked waits until the one process of the run's sandboxes
// is blocked reading isolate.BootstrapFD (from /proc/PID/syscall: read is
// system call 0 on x86_64, 63 on arm64), that is, until the prepared
// interpreter has loaded its modules and waits for a script.
func waitBootstrapBlocked(t testing.TB, runID string) {
	t.Helper()
	want := fmt.Sprintf("0x%x", isolate.BootstrapFD)
	deadline := time.Now().Add(30 * time.Second)
	for {
		procs := runProcs(t, runID)
		for _, pid := range procs {
			sc, err := os.ReadFile(filepath.Join("/proc", pid, "syscall"))
			if f := strings.Fields(string(sc)); err == nil && len(f) > 1 && (f[0] == "0" || f[0] == "63") && f[1] == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process of run %s blocked reading fd %d after 30 s (%d in its cgroups)", runID, isolate.BootstrapFD, len(procs))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLargeScriptHandedOver: a script larger than a pipe's buffer reaches
// the waiting interpreter whole.
func TestLargeScriptHandedOver(t *testing.T) {
	e := newEnv(t)
	pad := strings.Repeat("# "+strings.Repeat("x", 98)+"\n", 9000) // 900 kB
	script := pad + "import json\njson.dump({'len': len(open(__file__).read())}, open('/query/out', 'w'))\n"
	o := e.run(t, e.template(t, ""), script)
	require.Equal(t, isolate.KindOK, o.Kind, "%s: %s", o.Detail, o.Stderr)
	assert.Equal(t, fmt.Sprintf(`{"len": %d}`, len(script)), string(o.Output))
}

// TestIdleInterpreterKilled: a prepared interpreter that ended while it
// waited is a launch failure, never a run of the script elsewhere, and the
// sandbox is still reclaimed.
func TestIdleInterpreterKilled(t *testing.T) {
	e, ctx, sb := prepared(t, "")
	defer func() { require.NoError(t, sb.Destroy(ctx)) }()
	waitBootstrapBlocked(t, e.runID)
	procs := leftoverProcs(t, e.runID)
	require.Len(t, procs, 1, "one interpreter waits")
	pid, err := strconv.Atoi(strings.Fields(procs[0])[0])
	require.NoError(t, err)
	require.NoError(t, unix.Kill(pid, unix.SIGKILL))
	for len(leftoverProcs(t, e.runID)) > 0 {
		time.Sleep(time.Millisecond)
	}
	o := sb.Exec(ctx, isolate.Job{InvocationID: "late", Script: []byte(okScript)})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind, o.Detail)
	require.NoError(t, sb.Destroy(ctx))
	e.assertIdle(t)
}

// TestEndingsLikePlainInterpreter runs scripts whose results depend on how
// the interpreter ends (files left open, finalisers, atexit callbacks,
// threads, exit statuses) through the bootstrap, as every default job runs,
// and through the plain interpreter (the default argv with its flags in
// another order, which the runtime runs as it is), inside the sandbox under
// the seccomp policy, and wants the same outcome from both: kind, status,
// output file, stdout and stderr. The bootstrap may end some of them with
// os._exit after the interpreter's first steps (isolate/bootstrap.py); the
// table of isolate's bootstrap test says which.
func TestEndingsLikePlainInterpreter(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, "")
	plain := []string{"/usr/bin/python3", "-I", "-B", "-S", isolate.ScriptPath}
	require.False(t, isolate.IsDefaultArgv(plain))
	scripts := map[string]string{
		"closed-with":      "import json\nwith open('/query/out', 'w') as f:\n    json.dump({'ok': True}, f)\nprint('done', end='')\n",
		"unflushed-global": "import json\nf = open('/query/out', 'w')\njson.dump({'late': True}, f)\n",
		"del-writes":       "class D:\n    def __del__(self):\n        print('del')\nd = D()\nopen('/query/out', 'w').write('1')\n",
		"atexit-writes":    "import atexit\ndef w():\n    with open('/query/out', 'w') as f:\n        f.write('2')\natexit.register(w)\n",
		"thread-joined":    "import threading\ndef w():\n    open('/query/out', 'w').write('3')\nthreading.Thread(target=w).start()\n",
		"exit-3":           "import sys\nopen('/query/out', 'w').write('4')\nprint('x', end='')\nsys.exit(3)\n",
		"exit-msg":         "import sys\nsys.exit('bye')\n",
		"raise":            "import atexit, sys\natexit.register(lambda: print(type(sys.last_value).__name__))\nraise ValueError('v')\n",
		"stdout-closed":    "import sys\nopen('/query/out', 'w').write('5')\nsys.stdout.close()\n",
		"interrupt":        "open('/query/out', 'w').write('6')\nraise KeyboardInterrupt\n",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			sb, err := e.rt.Prepare(ctx, tpl)
			require.NoError(t, err)
			boot := sb.Exec(ctx, isolate.Job{InvocationID: "boot", Script: []byte(script)})
			require.NoError(t, sb.Destroy(ctx))
			sb, err = e.rt.Prepare(ctx, tpl)
			require.NoError(t, err)
			cold := sb.Exec(ctx, isolate.Job{InvocationID: "plain", Script: []byte(script), Argv: plain})
			require.NoError(t, sb.Destroy(ctx))
			for _, o := range []*isolate.Outcome{&boot, &cold} {
				o.Timings, o.Detail = isolate.Timings{}, ""
			}
			// (An uncaught KeyboardInterrupt ends the plain interpreter
			// with kill(2), which the policy answers with SIGSYS.)
			assert.Equal(t, cold, boot)
		})
	}
	e.assertIdle(t)
}
