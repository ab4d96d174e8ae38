package policy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/opencontainers/runc/libcontainer/seccomp"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The tests re-execute the test binary as a child that loads the compiled
// default policy exactly as runc init does (no_new_privs, then
// seccomp.InitSeccomp on the libcontainer configuration, which includes
// runc's ENOSYS stub) and then does one thing under the filter.
const (
	childModeEnv   = "AWF_POLICY_TEST_CHILD" // python | syscall | hold
	childNrEnv     = "AWF_POLICY_TEST_NR"
	childArgsEnv   = "AWF_POLICY_TEST_ARGS"   // comma-separated hex
	childExecEnv   = "AWF_POLICY_TEST_EXEC"   // python: script and root, tab-separated
	childLoaderEnv = "AWF_POLICY_TEST_LOADER" // "raw": prctl with Policy.BPF instead of runc
	childPolicyEnv = "AWF_POLICY_TEST_POLICY" // a .policy file instead of the default
	benchKindEnv   = "AWF_POLICY_BENCH"       // bench: none | runc | linear
	benchNEnv      = "AWF_POLICY_BENCH_N"     // bench: iterations
	benchCallEnv   = "AWF_POLICY_BENCH_CALL"  // bench: getppid | fcntl
)

// benchChild times getppid or fcntl(F_GETFD) under the filter kind named in the environment
// and prints the mean nanoseconds per call.
func benchChild() int {
	n, err := strconv.Atoi(os.Getenv(benchNEnv))
	if err != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "bench: bad iteration count")
		return 100
	}
	if kind := os.Getenv(benchKindEnv); kind != "none" {
		p, err := Default()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 100
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 100
		}
		switch kind {
		case "runc":
			cfg, err := p.Libcontainer()
			if err == nil {
				_, err = seccomp.InitSeccomp(cfg)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 100
			}
		case "linear":
			a, _ := NativeArch()
			info, _ := lookupArch(a)
			f, err := p.filter(info, treeOff)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 100
			}
			prog, err := exportBPF(f)
			f.Release()
			if err == nil {
				err = loadProgram(prog)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 100
			}
		}
	}
	nr, a0, a1 := uintptr(unix.SYS_GETPPID), uintptr(0), uintptr(0)
	if os.Getenv(benchCallEnv) == "fcntl" {
		// A conditional rule: the kernel cannot cache the verdict, the BPF runs.
		nr, a0, a1 = unix.SYS_FCNTL, 0, unix.F_GETFD
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		unix.RawSyscall(nr, a0, a1, 0)
	}
	el := time.Since(start)
	_, _ = unix.Write(1, []byte(fmt.Sprintf("%.2f\n", float64(el.Nanoseconds())/float64(n))))
	return 0
}

// debianPython is the distribution interpreter (PATH may hold a pyenv shim).
const debianPython = "/usr/bin/python3"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	if pid := os.Getenv(attestHelperEnv); pid != "" {
		os.Exit(attestHelper(pid))
	}
	os.Exit(m.Run())
}

// childMain runs in the re-executed test binary.
func childMain(mode string) int {
	// The filter goes on this thread only (as in runc init), and execve or
	// the probe must happen on the same thread.
	runtime.LockOSThread()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "child: %v\n", err)
		return 100
	}
	var probe struct {
		nr   uintptr
		args [6]uintptr
	}
	var argv []string
	switch mode {
	case "syscall":
		nr, err := strconv.ParseUint(os.Getenv(childNrEnv), 0, 64)
		if err != nil {
			return fail(err)
		}
		probe.nr = uintptr(nr)
		for i, s := range strings.Split(os.Getenv(childArgsEnv), ",") {
			if s == "" || i >= 6 {
				continue
			}
			v, err := strconv.ParseUint(s, 0, 64)
			if err != nil {
				return fail(err)
			}
			probe.args[i] = uintptr(v)
		}
	case "python":
		argv = append([]string{"python3", "-I", "-S", "-B"}, strings.Split(os.Getenv(childExecEnv), "\t")...)
	case "hold", "exechold":
	case "bench":
		return benchChild()
	default:
		return fail(fmt.Errorf("unknown mode %q", mode))
	}
	p, err := Default()
	if f := os.Getenv(childPolicyEnv); f != "" {
		p, err = Load(f)
	}
	if err != nil {
		return fail(err)
	}
	cfg, err := p.Libcontainer()
	if err != nil {
		return fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("no_new_privs: %w", err))
	}
	if l := os.Getenv(childLoaderEnv); l == "raw" || l == "linear" {
		// The exported program alone, as libseccomp built it (no runc stub);
		// "linear" without the binary tree: another form, the same decisions.
		native, _ := NativeArch()
		prog, err := p.BPF(native)
		if l == "linear" {
			info, _ := lookupArch(native)
			var f *libseccomp.ScmpFilter
			if f, err = p.filter(info, treeOff); err == nil {
				prog, err = exportBPF(f)
				f.Release()
			}
		}
		if err == nil {
			err = loadProgram(prog)
		}
		if err != nil {
			return fail(fmt.Errorf("load raw filter: %w", err))
		}
	} else if _, err := seccomp.InitSeccomp(cfg); err != nil {
		return fail(fmt.Errorf("load filter: %w", err))
	}
	// From here on every system call is filtered.
	switch mode {
	case "exechold":
		// Every thread of the new image inherits the filter, as in a sandbox.
		argv = []string{"python3", "-I", "-S", "-B", "-c", "import sys; print('ready', flush=True); sys.stdin.read()"}
		err := syscall.Exec(debianPython, argv, []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"})
		return fail(fmt.Errorf("exec: %w", err))
	case "python":
		err := syscall.Exec(debianPython, argv, []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TMPDIR=" + os.Getenv("TMPDIR")})
		return fail(fmt.Errorf("exec: %w", err))
	case "hold":
		_, _ = unix.Write(1, []byte(strconv.Itoa(unix.Gettid())+"\n"))
		var buf [1]byte
		for {
			n, err := unix.Read(0, buf[:])
			if n <= 0 && !errors.Is(err, unix.EINTR) {
				return 0
			}
		}
	}
	r1, _, errno := unix.RawSyscall6(probe.nr, probe.args[0], probe.args[1], probe.args[2], probe.args[3], probe.args[4], probe.args[5])
	var msg string
	if errno != 0 {
		msg = "errno " + errnoName(errno) + "\n"
	} else {
		msg = fmt.Sprintf("ret %d\n", r1)
	}
	_, _ = unix.Write(1, []byte(msg))
	return 0
}

// childResult is what a child did.
type childResult struct {
	stdout, stderr string
	status         syscall.WaitStatus
}

// killedBySIGSYS reports a seccomp kill.
func (r childResult) killedBySIGSYS() bool {
	return r.status.Signaled() && r.status.Signal() == unix.SIGSYS
}

func (r childResult) String() string {
	return fmt.Sprintf("status %v, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
}

// runChild re-executes the test binary in mode with extra environment.
func runChild(t testing.TB, mode string, env ...string) childResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append([]string{childModeEnv + "=" + mode, "TMPDIR=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("child %s: %v", mode, err)
	}
	require.NoError(t, ctx.Err(), "child %s timed out; stderr: %s", mode, errb.String())
	return childResult{stdout: out.String(), stderr: errb.String(), status: cmd.ProcessState.Sys().(syscall.WaitStatus)}
}

// probeSyscall runs one system call under the filter.
func probeSyscall(t *testing.T, nr int, args []uint64) childResult {
	t.Helper()
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = fmt.Sprintf("%#x", a)
	}
	return runChild(t, "syscall", fmt.Sprintf("%s=%d", childNrEnv, nr), childArgsEnv+"="+strings.Join(parts, ","))
}

// startPiped starts cmd with pipes on its stdin and stdout and its stderr
// captured, the shape of every child these tests hold open (holdChild,
// startReady); the caller ends and reaps it.
func startPiped(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser, *bytes.Buffer) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errb := new(bytes.Buffer)
	cmd.Stderr = errb
	require.NoError(t, cmd.Start())
	return stdin, stdout, errb
}

// holdChild starts a child that loads the filter and blocks; it returns the
// filtered thread's id and a function that ends the child and waits for it.
func holdChild(t *testing.T) (int, func() childResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = []string{childModeEnv + "=hold"}
	stdin, stdout, errb := startPiped(t, cmd)
	done := false
	finish := func() childResult {
		if done {
			return childResult{}
		}
		done = true
		_ = stdin.Close()
		rest, _ := io.ReadAll(stdout)
		_ = cmd.Wait()
		cancel()
		return childResult{stdout: string(rest), stderr: errb.String(), status: cmd.ProcessState.Sys().(syscall.WaitStatus)}
	}
	t.Cleanup(func() { finish() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		res := finish() // reads stderr only once the child is gone
		t.Fatalf("child did not report its thread id: %v; %s", err, res)
	}
	tid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	return tid, finish
}

// loadProgram installs a classic-BPF seccomp program on the calling thread
// (no_new_privs must already be set).
func loadProgram(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
	runtime.KeepAlive(prog)
	return err
}
