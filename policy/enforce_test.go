package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// nativeInfo returns the host arch, which the default policy must cover.
func nativeInfo(t *testing.T) archInfo {
	t.Helper()
	name, err := NativeArch()
	require.NoError(t, err)
	a, err := lookupArch(name)
	require.NoError(t, err)
	return a
}

func TestStdlibWorkloadUnderFilter(t *testing.T) {
	_, err := os.Stat(debianPython)
	require.NoError(t, err, "the workload needs Debian's %s (tests/setup/deps.sh installs python3)", debianPython)
	script, err := filepath.Abs("testdata/workload.py")
	require.NoError(t, err)
	root := "/usr/lib/python3.11/json"
	if _, err := os.Stat(root); err != nil {
		root = filepath.Dir(script) // any tree will do
	}
	// As runc loads it, and as the bare program Policy.BPF exports.
	for _, loader := range []string{"runc", "raw"} {
		t.Run(loader, func(t *testing.T) {
			res := runChild(t, "python", childExecEnv+"="+script+"\t"+root, childLoaderEnv+"="+loader)
			require.False(t, res.killedBySIGSYS(), "the workload was killed by the filter: %s", res)
			require.True(t, res.status.Exited() && res.status.ExitStatus() == 0, "workload failed: %s", res)
			for _, step := range []string{"walk ", "json re ok", "gzip bz2 lzma ok", "sqlite ok", "threads ok", "files ok", "misc ok", "refused ok", "OK"} {
				assert.Contains(t, res.stdout, step)
			}
		})
	}
}

// TestPythonForkIsKilled: the policy is subprocess-free.
func TestPythonForkIsKilled(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "fork.py")
	require.NoError(t, os.WriteFile(script, []byte("import os\nprint('before', flush=True)\nos.fork()\nprint('after fork')\n"), 0o600))
	for _, loader := range []string{"runc", "raw"} {
		res := runChild(t, "python", childExecEnv+"="+script, childLoaderEnv+"="+loader)
		require.True(t, res.killedBySIGSYS(), "%s: os.fork was not killed: %s", loader, res)
		assert.Equal(t, "before\n", res.stdout)
	}
}

// safeProbeArgs are arguments that make a system call fail harmlessly if a
// broken filter ever let it run: bad descriptors, pids, pointers and flags.
var safeProbeArgs = []uint64{0x7ffffff0, 0x7ffffff0, 0x7ffffff0, 0x7ffffff0, 0x7ffffff0, 0x7ffffff0}

// probeOverrides replaces safeProbeArgs where those could do something.
var probeOverrides = map[string][]uint64{
	"shmget": {0, 0, 0}, // IPC_PRIVATE, size 0: EINVAL
}

// numberedRule is a rule with its system call's number on this host.
type numberedRule struct {
	Rule
	nr int
}

// nativeRules returns the unconditional rules of p with action kind that name
// a system call this host has, the rules a child can probe one by one.
func nativeRules(t *testing.T, p *Policy, kind ActionKind) []numberedRule {
	a := nativeInfo(t)
	var out []numberedRule
	for _, r := range p.Rules {
		if r.Action.Kind != kind || len(r.Conds) > 0 {
			continue
		}
		if nr, ok := syscallNumber(r.Syscall, a); ok {
			out = append(out, numberedRule{r, nr})
		}
	}
	return out
}

func TestDeniedSyscallsAreKilled(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	rules := nativeRules(t, p, ActKill)
	for _, r := range rules {
		args := safeProbeArgs
		if o, ok := probeOverrides[r.Syscall]; ok {
			args = o
		}
		res := probeSyscall(t, r.nr, args)
		assert.True(t, res.killedBySIGSYS(), "%s (nr %d) was not killed: %s", r.Syscall, r.nr, res)
	}
	require.Greater(t, len(rules), 90, "expected every deny rule to be probed")
	// The list, by name, so a policy edit cannot drop one silently.
	for _, name := range []string{"unshare", "setns", "mount", "ptrace", "bpf", "keyctl", "add_key", "request_key",
		"userfaultfd", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register", "kexec_load",
		"kexec_file_load", "init_module", "finit_module", "delete_module", "process_vm_readv", "process_vm_writev",
		"pidfd_getfd", "open_by_handle_at"} {
		assert.True(t, hasRule(p, name, ActKill), "python3.policy must name %s as kill", name)
	}
}

func hasRule(p *Policy, name string, kind ActionKind) bool {
	for _, r := range p.Rules {
		if r.Syscall == name && r.Action.Kind == kind && len(r.Conds) == 0 {
			return true
		}
	}
	return false
}

func TestErrnoRulesAnswerTheirErrno(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	for _, r := range nativeRules(t, p, ActErrno) {
		res := probeSyscall(t, r.nr, safeProbeArgs)
		assert.Equal(t, "errno "+errnoName(r.Action.Errno)+"\n", res.stdout, "%s: %s", r.Syscall, res)
	}
}

// TestArgumentConditions probes the conditional rules with real calls. Each
// "allowed" case uses arguments the kernel itself rejects, so nothing runs.
func TestArgumentConditions(t *testing.T) {
	const (
		vmThread = unix.CLONE_VM | unix.CLONE_THREAD // no CLONE_SIGHAND: the kernel says EINVAL
	)
	cases := []struct {
		name    string
		syscall string
		args    []uint64
		want    string // "kill" or the child's output
	}{
		// Every socket and pipe takes an inode number from the host-wide
		// counter: refused whatever the family, with valid arguments too.
		{"socket AF_UNIX", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, "errno EPERM\n"},
		{"socket AF_INET", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, "errno EPERM\n"},
		{"socket AF_INET6", "socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM, 0}, "errno EPERM\n"},
		{"socket AF_NETLINK", "socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 0}, "errno EPERM\n"},
		{"socket AF_PACKET", "socket", []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, "errno EPERM\n"},
		{"socket AF_VSOCK", "socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, "errno EPERM\n"},
		{"socket AF_ALG", "socket", []uint64{unix.AF_ALG, unix.SOCK_SEQPACKET, 0}, "errno EPERM\n"},
		{"socket AF_UNIX in high bits", "socket", []uint64{1<<32 | unix.AF_INET, unix.SOCK_STREAM, 0}, "errno EPERM\n"},
		{"socketpair AF_UNIX", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0, 0x7ffffff0}, "errno EPERM\n"},
		{"socketpair AF_INET", "socketpair", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0, 0x7ffffff0}, "errno EPERM\n"},
		{"pipe2", "pipe2", []uint64{0x7ffffff0, 0}, "errno EPERM\n"},
		// Page cache. preadv2/pwritev2 on the child's stdin (/dev/null) with
		// no buffers: without flags the call runs (ret 0 or EBADF for
		// writing a read-only descriptor); any flag is refused.
		{"preadv2 no flags", "preadv2", []uint64{0, 0, 0, 0, 0, 0}, "ret 0\n"},
		{"preadv2 RWF_NOWAIT", "preadv2", []uint64{0, 0, 0, 0, 0, unix.RWF_NOWAIT}, "errno EPERM\n"},
		{"preadv2 RWF_HIPRI", "preadv2", []uint64{0, 0, 0, 0, 0, unix.RWF_HIPRI}, "errno EPERM\n"},
		{"preadv2 flag in high bits", "preadv2", []uint64{0, 0, 0, 0, 0, 1 << 32}, "errno EPERM\n"},
		{"pwritev2 no flags", "pwritev2", []uint64{0x7ffffff0, 0, 0, 0, 0, 0}, "errno EBADF\n"},
		{"pwritev2 RWF_NOWAIT", "pwritev2", []uint64{0x7ffffff0, 0, 0, 0, 0, unix.RWF_NOWAIT}, "errno EPERM\n"},
		{"pwritev2 RWF_DSYNC", "pwritev2", []uint64{0x7ffffff0, 0, 0, 0, 0, unix.RWF_DSYNC}, "errno EPERM\n"},
		// madvise on an unaligned address: an allowed advice reaches the
		// kernel, which says EINVAL; a refused one never does.
		{"madvise MADV_NORMAL", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_NORMAL}, "errno EINVAL\n"},
		{"madvise MADV_RANDOM", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_RANDOM}, "errno EINVAL\n"},
		{"madvise MADV_SEQUENTIAL", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_SEQUENTIAL}, "errno EINVAL\n"},
		{"madvise MADV_DONTNEED", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_DONTNEED}, "errno EINVAL\n"},
		{"madvise MADV_FREE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_FREE}, "errno EINVAL\n"},
		{"madvise MADV_DONTFORK", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_DONTFORK}, "errno EINVAL\n"},
		{"madvise MADV_DOFORK", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_DOFORK}, "errno EINVAL\n"},
		{"madvise MADV_HUGEPAGE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_HUGEPAGE}, "errno EINVAL\n"},
		{"madvise MADV_NOHUGEPAGE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_NOHUGEPAGE}, "errno EINVAL\n"},
		{"madvise MADV_DONTDUMP", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_DONTDUMP}, "errno EINVAL\n"},
		{"madvise MADV_DODUMP", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_DODUMP}, "errno EINVAL\n"},
		{"madvise MADV_WIPEONFORK", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_WIPEONFORK}, "errno EINVAL\n"},
		{"madvise MADV_KEEPONFORK", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_KEEPONFORK}, "errno EINVAL\n"},
		{"madvise MADV_WILLNEED", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_WILLNEED}, "errno EPERM\n"},
		{"madvise unassigned 5", "madvise", []uint64{0x7ffffff1, 4096, 5}, "errno EPERM\n"},
		{"madvise MADV_REMOVE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_REMOVE}, "errno EPERM\n"},
		{"madvise MADV_MERGEABLE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_MERGEABLE}, "errno EPERM\n"},
		{"madvise MADV_UNMERGEABLE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_UNMERGEABLE}, "errno EPERM\n"},
		{"madvise MADV_COLD", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_COLD}, "errno EPERM\n"},
		{"madvise MADV_PAGEOUT", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_PAGEOUT}, "errno EPERM\n"},
		{"madvise MADV_POPULATE_READ", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_POPULATE_READ}, "errno EPERM\n"},
		{"madvise MADV_POPULATE_WRITE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_POPULATE_WRITE}, "errno EPERM\n"},
		{"madvise MADV_DONTNEED_LOCKED", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_DONTNEED_LOCKED}, "errno EPERM\n"},
		{"madvise MADV_COLLAPSE", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_COLLAPSE}, "errno EPERM\n"},
		{"madvise MADV_HWPOISON", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_HWPOISON}, "errno EPERM\n"},
		{"madvise MADV_GUARD_INSTALL", "madvise", []uint64{0x7ffffff1, 4096, unix.MADV_GUARD_INSTALL}, "errno EPERM\n"},
		{"madvise DONTNEED in high bits", "madvise", []uint64{0x7ffffff1, 4096, 1<<32 | unix.MADV_DONTNEED}, "errno EPERM\n"},
		{"madvise -1", "madvise", []uint64{0x7ffffff1, 4096, ^uint64(0)}, "errno EPERM\n"},
		// Shared anonymous memory is a file on the kernel's shm mount.
		{"mmap private anonymous", "mmap", []uint64{0, 0, unix.PROT_READ, unix.MAP_PRIVATE | unix.MAP_ANONYMOUS, ^uint64(0), 0}, "errno EINVAL\n"},
		{"mmap shared file", "mmap", []uint64{0, 4096, unix.PROT_READ, unix.MAP_SHARED, 0x7ffffff0, 0}, "errno EBADF\n"},
		{"mmap shared anonymous", "mmap", []uint64{0, 4096, unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_ANONYMOUS, ^uint64(0), 0}, "errno EPERM\n"},
		{"mmap shared-validate anonymous", "mmap", []uint64{0, 4096, unix.PROT_READ, unix.MAP_SHARED_VALIDATE | unix.MAP_ANONYMOUS, ^uint64(0), 0}, "errno EPERM\n"},
		{"clone thread flags", "clone", []uint64{vmThread, 0, 0, 0, 0}, "errno EINVAL\n"},
		{"clone fork-like", "clone", []uint64{unix.CLONE_SIGHAND, 0, 0, 0, 0}, "kill"},
		{"clone CLONE_NEWUSER", "clone", []uint64{vmThread | unix.CLONE_NEWUSER, 0, 0, 0, 0}, "kill"},
		{"clone CLONE_NEWNS", "clone", []uint64{vmThread | unix.CLONE_NEWNS, 0, 0, 0, 0}, "kill"},
		{"clone CLONE_NEWPID", "clone", []uint64{vmThread | unix.CLONE_NEWPID, 0, 0, 0, 0}, "kill"},
		{"clone CLONE_NEWNET", "clone", []uint64{vmThread | unix.CLONE_NEWNET, 0, 0, 0, 0}, "kill"},
		{"clone CLONE_NEWUTS", "clone", []uint64{vmThread | unix.CLONE_NEWUTS, 0, 0, 0, 0}, "kill"},
		{"clone CLONE_NEWIPC", "clone", []uint64{vmThread | unix.CLONE_NEWIPC, 0, 0, 0, 0}, "kill"},
		{"clone CLONE_NEWCGROUP", "clone", []uint64{vmThread | unix.CLONE_NEWCGROUP, 0, 0, 0, 0}, "kill"},
		{"ioctl TCGETS", "ioctl", []uint64{0x7ffffff0, unix.TCGETS, 0}, "errno EBADF\n"},
		{"ioctl FIONREAD", "ioctl", []uint64{0x7ffffff0, 0x541B, 0}, "errno EBADF\n"},
		{"ioctl TIOCSTI", "ioctl", []uint64{0x7ffffff0, unix.TIOCSTI, 0}, "kill"},
		{"ioctl TIOCSETD", "ioctl", []uint64{0x7ffffff0, unix.TIOCSETD, 0}, "kill"},
		{"ioctl TIOCLINUX", "ioctl", []uint64{0x7ffffff0, 0x541C, 0}, "kill"},
		{"fcntl F_GETFD", "fcntl", []uint64{0x7ffffff0, unix.F_GETFD, 0}, "errno EBADF\n"},
		{"fcntl F_SETLK", "fcntl", []uint64{0x7ffffff0, unix.F_SETLK, 0}, "errno ENOLCK\n"},
		{"fcntl F_OFD_SETLK", "fcntl", []uint64{0x7ffffff0, unix.F_OFD_SETLK, 0}, "errno ENOLCK\n"},
		{"fcntl F_SETLEASE", "fcntl", []uint64{0x7ffffff0, unix.F_SETLEASE, 0}, "kill"},
		{"fcntl F_NOTIFY", "fcntl", []uint64{0x7ffffff0, unix.F_NOTIFY, 0}, "kill"},
		{"prlimit64 self", "prlimit64", []uint64{0, 0x7ffffff0, 0, 0}, "errno EINVAL\n"},
		{"prlimit64 other", "prlimit64", []uint64{1, unix.RLIMIT_NOFILE, 0, 0}, "kill"},
	}
	a := nativeInfo(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nr, ok := syscallNumber(tc.syscall, a)
			require.True(t, ok)
			res := probeSyscall(t, nr, tc.args)
			if tc.want == "kill" {
				assert.True(t, res.killedBySIGSYS(), "not killed: %s", res)
				return
			}
			assert.Equal(t, tc.want, res.stdout, "%s", res)
		})
	}
}

// TestRuncENOSYSTail shows runc's documented addition: a number above the
// highest syscall the policy names gets ENOSYS, not the default kill.
func TestRuncENOSYSTail(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	a := nativeInfo(t)
	from, ok := p.enosysFrom(a.name)
	require.True(t, ok)
	res := probeSyscall(t, int(from), safeProbeArgs)
	assert.Equal(t, "errno ENOSYS\n", res.stdout, "%s", res)
	res = probeSyscall(t, int(from)-1, safeProbeArgs)
	assert.True(t, res.killedBySIGSYS(), "the highest named syscall must still be killed: %s", res)
}

// TestLoadedFilterMatchesGolden reads the filter back from a live process
// the way verify does and compares it with the golden table.
func TestLoadedFilterMatchesGolden(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	a := nativeInfo(t)
	tid, finish := holdChild(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	filters, err := ReadFilters(ctx, tid)
	require.NoError(t, err, "PTRACE_SECCOMP_GET_FILTER needs root and CONFIG_CHECKPOINT_RESTORE")
	require.Len(t, filters, 1)
	loaded := filters[0]

	mine, err := p.BPF(a.name)
	require.NoError(t, err)
	require.Greater(t, len(loaded), len(mine), "runc prepends its stub")
	assert.Equal(t, mine, loaded[len(loaded)-len(mine):], "the loaded filter must end with exactly the program the policy compiles to")

	golden, err := p.Table(a.name)
	require.NoError(t, err)
	require.Equal(t, map[string]uint32{a.name: 457}, golden.ENOSYSFrom, "futex_requeue (456) is the highest syscall python3.policy names")
	got, err := DecodeFilter(a.name, loaded)
	require.NoError(t, err)
	assert.Empty(t, CompareLoaded(golden, got))
	// Without the stub allowance the tail shows up as differences.
	strict := golden
	strict.ENOSYSFrom = nil
	strict.Default = "allow" // disables inference: nothing matches the default
	assert.NotEmpty(t, CompareLoaded(strict, got))

	// A tampered filter is caught: make every allow return kill.
	tampered := append([]unix.SockFilter(nil), loaded...)
	read, ok := syscallNumber("read", a)
	require.True(t, ok)
	before, err := Evaluate(tampered, a.name, uint32(read), [6]uint64{})
	require.NoError(t, err)
	require.Equal(t, "allow", before)
	for i := range tampered {
		if tampered[i].Code == bpfRET|bpfK && tampered[i].K == retAllow {
			tampered[i].K = retKillProcess
		}
	}
	bad, err := DecodeFilter(a.name, tampered)
	require.NoError(t, err)
	diffs := CompareLoaded(golden, bad)
	assert.NotEmpty(t, diffs)
	assert.Contains(t, strings.Join(diffs, "\n"), a.name+" read (nr ")

	res := finish()
	assert.True(t, res.status.Exited() && res.status.ExitStatus() == 0, "held child: %s", res)
}
