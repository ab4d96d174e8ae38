package isolate

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostPython is the interpreter the bootstrap's own tests run on; the
// sandboxes' tests run it on the root filesystem.
const hostPython = "/usr/bin/python3"

// runResult is what a script's run shows outside.
type runResult struct {
	stdout, stderr string
	code           int
}

// runCold runs path as DefaultArgv would.
func runCold(t *testing.T, path string) runResult {
	t.Helper()
	cmd := exec.Command(hostPython, append(DefaultArgv[1:len(DefaultArgv)-1:len(DefaultArgv)-1], path)...)
	return runCmd(t, cmd, nil)
}

// runBootstrap runs path through the bootstrap, handing it the file's bytes
// on fd.
func runBootstrap(t *testing.T, path string, fd int) runResult {
	t.Helper()
	argv := BootstrapArgv(fd)
	argv[len(argv)-1] = path
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
	return runCmd(t, cmd, func() {
		r.Close()
		require.NoError(t, HandScript(w, script))
		require.NoError(t, w.Close())
	})
}

func runCmd(t *testing.T, cmd *exec.Cmd, started func()) runResult {
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
	return runResult{stdout.String(), stderr.String(), code}
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
	dir := t.TempDir()
	for name, src := range scripts {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".py")
			require.NoError(t, os.WriteFile(path, []byte(src), 0o444))
			cold := runCold(t, path)
			for _, fd := range []int{BootstrapFD, 0} {
				warm := runBootstrap(t, path, fd)
				require.Equal(t, cold, warm, "fd %d", fd)
			}
		})
	}
}

// TestBootstrapPreloads proves that the modules are loaded before the
// script runs and that none is bound in its namespace.
func TestBootstrapPreloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.py")
	require.NoError(t, os.WriteFile(path, []byte("import sys\nprint('json' in sys.modules, 'json' in globals())\n"), 0o444))
	r := runBootstrap(t, path, BootstrapFD)
	require.Equal(t, runResult{stdout: "True False\n"}, r)
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
