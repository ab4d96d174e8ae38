package isolate

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostPython is the interpreter the bootstrap's own tests run on; the
// sandboxes' tests run it on the root filesystem.
const hostPython = "/usr/bin/python3"

// runResult is what a script's run shows outside: its standard streams,
// exit status, and the file it may write next to itself (path + ".out",
// as a query's /query/out).
type runResult struct {
	stdout, stderr, out string
	code                int
}

// address is an object's address in a repr ("<function f at 0x7f…>"),
// which differs from run to run.
var address = regexp.MustCompile(` at 0x[0-9a-f]+>`)

func (r runResult) sameAddresses() runResult {
	r.stdout = address.ReplaceAllString(r.stdout, " at 0x…>")
	r.stderr = address.ReplaceAllString(r.stderr, " at 0x…>")
	return r
}

// runCold runs path as DefaultArgv would.
func runCold(t *testing.T, path string) runResult {
	t.Helper()
	cmd := exec.Command(hostPython, append(DefaultArgv()[1:len(DefaultArgv())-1], path)...)
	return runCmdOut(t, cmd, path+".out", nil)
}

// runBootstrap runs path through the bootstrap, handing it the file's bytes
// on fd. flags go before the bootstrap's -c (the tests of how it ends add
// -v, which makes the interpreter's own finalisation print what it tears
// down).
func runBootstrap(t *testing.T, path string, fd int, flags ...string) runResult {
	t.Helper()
	argv := BootstrapArgv(fd)
	argv[len(argv)-1] = path
	argv = slices.Insert(argv, len(DefaultArgv())-1, flags...)
	cmd := exec.Command(hostPython, argv[1:]...)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	if fd == 0 {
		cmd.Stdin = r
	} else {
		require.Equal(t, 3, fd)
		cmd.ExtraFiles = []*os.File{r}
	}
	script, err := os.ReadFile(path)
	require.NoError(t, err)
	return runCmdOut(t, cmd, path+".out", func() {
		r.Close()
		require.NoError(t, HandScript(w, script))
		require.NoError(t, w.Close())
	})
}

func runCmd(t *testing.T, cmd *exec.Cmd, started func()) runResult {
	t.Helper()
	return runCmdOut(t, cmd, "", started)
}

// runCmdOut runs cmd and, if out is not empty, reads and removes the file
// out afterwards.
func runCmdOut(t *testing.T, cmd *exec.Cmd, out string, started func()) runResult {
	t.Helper()
	if _, err := os.Stat(hostPython); err != nil {
		t.Fatalf("the bootstrap's tests need %s: %v", hostPython, err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"PATH=/usr/bin", "LANG=C.UTF-8"}
	require.NoError(t, cmd.Start())
	if started != nil {
		started()
	}
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	res := runResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
	if out != "" {
		b, err := os.ReadFile(out)
		if err == nil {
			res.out = string(b)
			require.NoError(t, os.Remove(out))
		} else {
			require.ErrorIs(t, err, os.ErrNotExist)
		}
	}
	return res
}

// TestBootstrapRunsLikeTheInterpreter runs scripts cold and through the
// bootstrap and compares everything they show: output, tracebacks, exit
// status, and what they see of their own namespace and argv. (A script
// with a NUL byte is the one difference: the 3.11 interpreter's file reader
// sometimes runs the text before a NUL, compile always refuses it.)
func TestBootstrapRunsLikeTheInterpreter(t *testing.T) {
	scripts := map[string]string{
		"ok": `import sys
print(sorted((k, type(v).__name__) for k, v in globals().items()))
print(__name__, __file__, sys.argv, sys.orig_argv[1:], sys.path == sys.path[:], __loader__.name, __spec__)
print(sys.flags)
import os
print(os.getcwd(), sorted(os.environ))
for fd in range(3, 64):
    try:
        os.fstat(fd)
        print("open fd", fd)
    except OSError:
        pass
`,
		"exit3":      "import sys\nsys.exit(3)\n",
		"exitmsg":    "raise SystemExit('bye')\n",
		"raise":      "def f():\n    raise ValueError('no')\n\nf()\n",
		"chained":    "try:\n    1/0\nexcept Exception as e:\n    raise KeyError(1) from e\n",
		"syntax":     "x = (\n",
		"indent":     "if True:\nprint(1)\n",
		"stderr":     "import sys\nprint('out')\nprint('err', file=sys.stderr)\n",
		"coding":     "# -*- coding: latin-1 -*-\nprint('\xe9')\n",
		"bom":        "\ufeffprint('bom')\n",
		"annotation": "x: int = 1\nprint(__annotations__)\n",
		"atexit":     "import atexit\natexit.register(lambda: print('bye'))\nraise RuntimeError\n",
	}
	for _, c := range endings {
		scripts["ending-"+c.name] = c.src
	}
	dir := t.TempDir()
	for name, src := range scripts {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".py")
			require.NoError(t, os.WriteFile(path, []byte(src), 0o444))
			cold := runCold(t, path).sameAddresses()
			for _, fd := range []int{BootstrapFD, 0} {
				warm := runBootstrap(t, path, fd).sameAddresses()
				require.Equal(t, cold, warm, "fd %d", fd)
			}
		})
	}
}

// endings are scripts whose results depend on how the interpreter ends:
// what it flushes, finalises and runs after the script, and the exit
// status it chooses. fast says whether the bootstrap may end them itself
// (os._exit after the interpreter's first steps) or must leave the ending
// to the interpreter's own finalisation. A script writes its "answer" to
// __file__ + ".out", as a query writes /query/out.
var endings = []struct {
	name string
	fast bool
	src  string
}{
	{"plain", true, "print('hi')\n"},
	{"no-newline", true, "import sys\nprint('partial', end='')\nsys.stderr.write('err, no newline')\n"},
	{"large-output", true, "import sys\nsys.stdout.write('x' * 200000)\n"},
	{"closed-with", true, "import json\nwith open(__file__ + '.out', 'w') as f:\n    json.dump({'ok': True}, f)\nprint('done')\n"},
	{"unflushed-global", false, "f = open(__file__ + '.out', 'w')\nf.write('written at exit')\n"},
	{"unflushed-in-object", false, "class H:\n    pass\nh = H()\nh.f = open(__file__ + '.out', 'wb')\nh.f.write(b'x' * 100)\n"},
	{"unflushed-in-module", false, "import json\njson.kept = open(__file__ + '.out', 'w')\njson.kept.write('kept')\n"},
	{"unflushed-then-exit", false, "import sys\nf = open(__file__ + '.out', 'w')\nf.write('a')\nsys.exit(4)\n"},
	{"del-prints", false, "class D:\n    def __del__(self):\n        print('del', type(self).__name__)\nd = D()\nprint('main')\n"},
	{"del-slots", false, "class D:\n    __slots__ = ()\n    def __del__(self):\n        print('del')\nd = D()\n"},
	{"del-in-cycle", false, "class D:\n    def __del__(self):\n        print('collected')\na = D()\na.me = a\ndel a\n"},
	{"del-raises", false, "class D:\n    def __del__(self):\n        raise ValueError('in del')\nd = D()\n"},
	{"del-writes-answer", false, "class D:\n    def __del__(self):\n        open(__file__ + '.out', 'w').write('from del')\nd = D()\n"},
	{"del-after-exception", false, "class D:\n    def __del__(self):\n        print('del')\ndef f():\n    d = D()\n    raise KeyError('k')\nf()\n"},
	{"atexit-order", true, "import atexit\nfor i in range(3):\n    atexit.register(print, 'exit', i)\nprint('main', end='')\n"},
	{"atexit-raises", true, "import atexit\natexit.register(lambda: 1 / 0)\natexit.register(print, 'before')\n"},
	{"atexit-exit", true, "import atexit, sys\natexit.register(sys.exit, 4)\n"},
	{"atexit-last-value", true, "import atexit, sys\natexit.register(lambda: print('last', type(sys.last_value).__name__))\nraise ValueError('v')\n"},
	{"atexit-writes-answer", true, "import atexit\ndef w():\n    with open(__file__ + '.out', 'w') as f:\n        f.write('at exit')\natexit.register(w)\n"},
	{"finalize-atexit", true, "import weakref\nclass O:\n    pass\no = O()\nweakref.finalize(o, print, 'finalized')\n"},
	{"finalize-no-atexit", false, "import weakref\nclass O:\n    pass\no = O()\nweakref.finalize(o, print, 'finalized').atexit = False\n"},
	{"weakref-callback", false, "import weakref\nclass O:\n    pass\no = O()\nr = weakref.ref(o, lambda r: print('callback'))\n"},
	{"weakset", true, "import weakref\nclass O:\n    pass\no = O()\ns = weakref.WeakSet([o])\nprint(len(s))\n"},
	{"thread-joined", true, "import threading, time\ndef run():\n    time.sleep(0.05)\n    print('thread')\nthreading.Thread(target=run).start()\nprint('main')\n"},
	{"thread-daemon", false, "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\nprint('main')\n"},
	{"thread-shutdown-raises", true, "import threading\nthreading._shutdown = lambda: 1 / 0\n"},
	{"generator-suspended", false, "def g():\n    try:\n        yield 1\n    finally:\n        print('generator closed')\nit = g()\nnext(it)\n"},
	{"generator-done", true, "def g():\n    yield 1\nit = g()\nlist(it)\nprint('done')\n"},
	{"coroutine-never-awaited", false, "async def c():\n    pass\nx = c()\n"},
	{"exit-none", true, "import sys\nsys.exit()\n"},
	{"exit-true", true, "import sys\nsys.exit(True)\n"},
	{"exit-256", true, "import sys\nsys.exit(256)\n"},
	{"exit-negative", true, "import sys\nsys.exit(-1)\n"},
	{"exit-huge", true, "import sys\nsys.exit(2 ** 70)\n"},
	{"exit-float", true, "import sys\nsys.exit(1.5)\n"},
	{"exit-msg", true, "import sys\nprint('out first', end='')\nsys.exit('msg')\n"},
	{"exit-tuple", true, "raise SystemExit(1, 2)\n"},
	{"os-exit", true, "import os\nprint('lost', end='')\nos._exit(5)\n"},
	{"excepthook", true, "import sys\nsys.excepthook = lambda t, v, tb: print('hook', t.__name__)\nraise KeyError(1)\n"},
	{"excepthook-raises", true, "import sys\ndef h(*a):\n    raise KeyError('in hook')\nsys.excepthook = h\nraise ValueError('v')\n"},
	{"excepthook-exits", true, "import sys\ndef h(*a):\n    sys.exit(6)\nsys.excepthook = h\nraise ValueError('v')\n"},
	{"excepthook-missing", true, "import sys\ndel sys.excepthook\nraise ValueError('v')\n"},
	{"keyboard-interrupt", true, "raise KeyboardInterrupt\n"},
	{"keyboard-interrupt-unflushed", false, "f = open(__file__ + '.out', 'w')\nf.write('data')\nraise KeyboardInterrupt\n"},
	{"exit-subclass", false, "class E(SystemExit):\n    pass\nraise E(3)\n"},
	{"scandir-open", true, "import os\nit = os.scandir('/')\nnext(it)\nprint('listed')\n"},
	{"scandir-warning", false, "import os, warnings\nwarnings.simplefilter('always')\nit = os.scandir('/')\nnext(it)\n"},
	{"builtins-replaced", false, "import builtins\nbuiltins.any = lambda it: False\nbuiltins.issubclass = lambda a, b: False\nf = open(__file__ + '.out', 'w')\nf.write('kept')\n"},
	{"os-exit-replaced", true, "import os\nos._exit = print\nprint('main')\n"},
	{"stdin", true, "import sys\nprint(repr(sys.stdin.read()))\n"},
	{"stdout-closed", true, "import sys\nprint('gone', end='')\nsys.stdout.close()\nprint('err', file=sys.stderr)\n"},
	{"stdout-fd-closed", false, "import os\nprint('pending', end='')\nos.close(1)\n"},
	{"stdout-replaced", false, "import sys\nsys.stdout = open(__file__ + '.out', 'w')\nprint('redirected')\n"},
	{"stdout-nonblocking", false, "import os\nos.set_blocking(1, False)\nprint('x')\n"},
	{"audit-hook", false, "import sys, os\nsys.addaudithook(lambda e, a: e == 'cpython._PySys_ClearAuditHooks' and os.write(1, b'audit'))\n"},
	{"gc-callback", false, "import gc\ngc.callbacks.append(lambda phase, info: print(phase))\n"},
	{"resource-warning", false, "import warnings\nwarnings.simplefilter('always')\nf = open(__file__)\n"},
}

// TestBootstrapEndsFastOnlyWhenUnobservable: the ending cases end through
// the bootstrap's os._exit exactly when they are marked fast, and through
// the interpreter's finalisation otherwise (-v makes the interpreter print
// "# cleanup" lines as it tears modules down). That they show the same
// results either way is TestBootstrapRunsLikeTheInterpreter.
func TestBootstrapEndsFastOnlyWhenUnobservable(t *testing.T) {
	dir := t.TempDir()
	for _, c := range endings {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".py")
			require.NoError(t, os.WriteFile(path, []byte(c.src), 0o444))
			r := runBootstrap(t, path, BootstrapFD, "-v")
			finalised := strings.Contains(r.stderr, "\n# cleanup[")
			require.Equal(t, !c.fast, finalised, "finalised by the interpreter")
		})
	}
}

// TestBootstrapPreloads proves that the modules are loaded before the
// script runs and that none is bound in its namespace.
func TestBootstrapPreloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.py")
	script := "import sys\nprint([m in sys.modules for m in ('json', 're', 'hashlib', 'subprocess', 'threading')], 'json' in globals())\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o444))
	r := runBootstrap(t, path, BootstrapFD)
	// subprocess (and the threading it brings) is not preloaded: no
	// sandbox can start a process, so it would only slow every cold start.
	require.Equal(t, runResult{stdout: "[True, True, True, False, False] False\n"}, r)
}

// TestBootstrapRefusesABadHandover: a closed pipe or a short script is an
// error the runtime sees, never a script run from partial bytes.
func TestBootstrapRefusesABadHandover(t *testing.T) {
	for name, msg := range map[string]string{"empty": "", "short": "10\nprint(1)", "noheader": "print(1)"} {
		t.Run(name, func(t *testing.T) {
			argv := BootstrapArgv(BootstrapFD)
			cmd := exec.Command(hostPython, argv[1:]...)
			r, w, err := os.Pipe()
			require.NoError(t, err)
			defer r.Close()
			cmd.ExtraFiles = []*os.File{r}
			res := runCmd(t, cmd, func() {
				r.Close()
				_, err := w.WriteString(msg)
				require.NoError(t, err)
				require.NoError(t, w.Close())
			})
			require.Equal(t, 125, res.code)
			require.True(t, strings.HasPrefix(res.stderr, "awf bootstrap: "), res.stderr)
			require.Empty(t, res.stdout)
		})
	}
}

func TestHandScriptBound(t *testing.T) {
	var b bytes.Buffer
	require.Error(t, HandScript(&b, make([]byte, MaxBootstrapScript+1)))
	require.NoError(t, HandScript(&b, []byte("pass\n")))
	require.Equal(t, "5\npass\n", b.String())
}
