package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ins builds one instruction.
func ins(code uint16, jt, jf uint8, k uint32) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

func TestVMInstructions(t *testing.T) {
	ret := func(k uint32) unix.SockFilter { return ins(bpfRET|bpfK, 0, 0, k) }
	cases := []struct {
		name string
		prog []unix.SockFilter
		nr   uint32
		args [6]uint64
		want string
	}{
		{"ret const", []unix.SockFilter{ret(retAllow)}, 0, [6]uint64{}, "allow"},
		{"ret errno", []unix.SockFilter{ret(retErrno | 38)}, 0, [6]uint64{}, "errno ENOSYS"},
		{"ret trace", []unix.SockFilter{ret(retTrace | 7)}, 0, [6]uint64{}, "trace 7"},
		{"ret log", []unix.SockFilter{ret(retLog)}, 0, [6]uint64{}, "log"},
		{"ret trap", []unix.SockFilter{ret(retTrap)}, 0, [6]uint64{}, "trap"},
		{"ret kill thread", []unix.SockFilter{ret(retKillThread)}, 0, [6]uint64{}, "kill_thread"},
		{"ret unknown", []unix.SockFilter{ret(0x12340000)}, 0, [6]uint64{}, "kill (unknown action 0x12340000)"},
		{"jeq nr", []unix.SockFilter{
			ins(bpfLD|bpfW|bpfABS, 0, 0, 0), ins(bpfJMP|bpfJEQ|bpfK, 0, 1, 39), ret(retAllow), ret(retKillProcess)}, 39, [6]uint64{}, "allow"},
		{"jeq nr miss", []unix.SockFilter{
			ins(bpfLD|bpfW|bpfABS, 0, 0, 0), ins(bpfJMP|bpfJEQ|bpfK, 0, 1, 39), ret(retAllow), ret(retKillProcess)}, 40, [6]uint64{}, "kill"},
		{"arg hi word", []unix.SockFilter{
			ins(bpfLD|bpfW|bpfABS, 0, 0, 20), ins(bpfJMP|bpfJEQ|bpfK, 0, 1, 1), ret(retAllow), ret(retKillProcess)}, 0, [6]uint64{1 << 32}, "allow"},
		{"alu and jset", []unix.SockFilter{
			ins(bpfLD|bpfW|bpfABS, 0, 0, 16), ins(bpfALU|bpfAND|bpfK, 0, 0, 0xf0), ins(bpfJMP|bpfJSET|bpfK, 0, 1, 0x10), ret(retAllow), ret(retKillProcess)}, 0, [6]uint64{0x11}, "allow"},
		{"scratch and x", []unix.SockFilter{
			ins(bpfLD|bpfIMM, 0, 0, 5), ins(bpfST, 0, 0, 3), ins(bpfLDX|bpfMEM, 0, 0, 3), ins(bpfLD|bpfIMM, 0, 0, 2),
			ins(bpfALU|bpfADD|bpfX, 0, 0, 0), ins(bpfJMP|bpfJEQ|bpfX, 1, 0, 0), ins(bpfJMP|bpfJGE|bpfK, 0, 1, 7), ret(retAllow), ret(retKillProcess)}, 0, [6]uint64{}, "allow"},
		{"ja and ret a", []unix.SockFilter{
			ins(bpfLD|bpfIMM, 0, 0, retErrno|1), ins(bpfJMP|bpfJA, 0, 0, 1), ret(retAllow), ins(bpfRET|bpfA, 0, 0, 0)}, 0, [6]uint64{}, "errno EPERM"},
		{"len and misc", []unix.SockFilter{
			ins(bpfLD|bpfW|bpfLEN, 0, 0, 0), ins(bpfMISC|bpfTAX, 0, 0, 0), ins(bpfLD|bpfIMM, 0, 0, 0), ins(bpfMISC|bpfTXA, 0, 0, 0),
			ins(bpfJMP|bpfJEQ|bpfK, 0, 1, 64), ret(retAllow), ret(retKillProcess)}, 0, [6]uint64{}, "allow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Evaluate(tc.prog, "x86_64", tc.nr, tc.args)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestVMRejectsInvalidPrograms(t *testing.T) {
	cases := map[string][]unix.SockFilter{
		"empty":             nil,
		"no final return":   {ins(bpfLD|bpfIMM, 0, 0, 0)},
		"unaligned load":    {ins(bpfLD|bpfW|bpfABS, 0, 0, 2), ins(bpfRET|bpfK, 0, 0, 0)},
		"load out of data":  {ins(bpfLD|bpfW|bpfABS, 0, 0, 64), ins(bpfRET|bpfK, 0, 0, 0)},
		"byte load":         {ins(bpfLD|0x10|bpfABS, 0, 0, 0), ins(bpfRET|bpfK, 0, 0, 0)},
		"jump out":          {ins(bpfJMP|bpfJEQ|bpfK, 5, 0, 0), ins(bpfRET|bpfK, 0, 0, 0)},
		"ja out":            {ins(bpfJMP|bpfJA, 0, 0, 9), ins(bpfRET|bpfK, 0, 0, 0)},
		"scratch slot":      {ins(bpfST, 0, 0, 16), ins(bpfRET|bpfK, 0, 0, 0)},
		"divide by zero":    {ins(bpfALU|bpfDIV|bpfK, 0, 0, 0), ins(bpfRET|bpfK, 0, 0, 0)},
		"unknown jump":      {ins(bpfJMP|0x50, 0, 0, 0), ins(bpfRET|bpfK, 0, 0, 0)},
		"bad return source": {ins(bpfRET|bpfX, 0, 0, 0)},
	}
	for name, prog := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeFilter("x86_64", prog)
			assert.Error(t, err)
		})
	}
}

func TestDefaultTable(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	for _, arch := range p.Arches {
		tb, err := p.Table(arch)
		require.NoError(t, err)
		assert.Equal(t, "kill", tb.Default)
		byName := map[string][]Row{}
		for _, r := range tb.Rows {
			byName[r.Syscall] = append(byName[r.Syscall], r)
		}
		one := func(name, want string) {
			rows := byName[name]
			require.Len(t, rows, 1, "%s %s: %v", arch, name, rows)
			assert.Equal(t, want, rows[0].Action, "%s %s", arch, name)
		}
		one("read", "allow")
		one("execve", "allow")
		one("fstatfs", "allow")
		one("statx", "allow")
		one("openat2", "errno ENOSYS")
		one("clone3", "errno ENOSYS")
		for _, n := range []string{"mount", "unshare", "setns", "ptrace", "bpf", "keyctl", "add_key", "request_key",
			"userfaultfd", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register", "kexec_load",
			"kexec_file_load", "init_module", "finit_module", "delete_module", "process_vm_readv", "process_vm_writev",
			"pidfd_getfd", "open_by_handle_at", "fork", "vfork", "memfd_create", "execveat"} {
			if _, ok := syscallNumber(n, mustArch(t, arch)); ok {
				one(n, "kill")
			}
		}
		// Every syscall the arch knows has a row.
		known := 0
		for nr := 0; nr < probeLimit; nr++ {
			if name, ok := syscallName(nr, mustArch(t, arch)); ok {
				known++
				assert.NotEmpty(t, byName[name], "%s %s has no row", arch, name)
			}
		}
		assert.Greater(t, known, 250)
		// Conditional rules appear as argument cases, computed from the BPF.
		one("socket", "errno EPERM")
		one("socketpair", "errno EPERM")
		one("pipe2", "errno EPERM")
		for _, n := range []string{"fadvise64", "readahead", "mincore", "cachestat", "remap_file_pages"} {
			one(n, "errno EPERM")
		}
		assert.Equal(t, []Row{
			{Arch: arch, Syscall: "preadv2", Case: "arg5 == 0x0", Action: "allow"},
			{Arch: arch, Syscall: "preadv2", Case: "arg5.hi == 0x0 && arg5 != 0x0", Action: "errno EPERM"},
			{Arch: arch, Syscall: "preadv2", Case: "otherwise", Action: "errno EPERM"},
		}, stripNr(byName["preadv2"]))
		madvise := stripNr(byName["madvise"])
		assert.Contains(t, madvise, Row{Arch: arch, Syscall: "madvise", Case: "arg2 == 0x4 (MADV_DONTNEED)", Action: "allow"})
		assert.Contains(t, madvise, Row{Arch: arch, Syscall: "madvise", Case: "arg2 == 0x3 (MADV_WILLNEED)", Action: "errno EPERM"})
		assert.Contains(t, madvise, Row{Arch: arch, Syscall: "madvise", Case: "arg2.hi == 0x0 && arg2 > 0x13", Action: "errno EPERM"})
		assert.Contains(t, madvise, Row{Arch: arch, Syscall: "madvise", Case: "arg2.hi > 0x0", Action: "errno EPERM"})
		assert.Len(t, madvise, 22, "13 allowed values, 7 refused ones and the two halves of > MADV_KEEPONFORK")
		assert.Contains(t, stripNr(byName["mmap"]), Row{Arch: arch, Syscall: "mmap", Case: "arg3 & 0x21 == 0x21 (MAP_SHARED|MAP_ANONYMOUS)", Action: "errno EPERM"})
		assert.Equal(t, []Row{
			{Arch: arch, Syscall: "clone", Case: "arg0 & 0x7e030100 == 0x10100 (CLONE_VM|CLONE_THREAD)", Action: "allow"},
			{Arch: arch, Syscall: "clone", Case: "otherwise", Action: "kill"},
		}, stripNr(byName["clone"]))
		ioctl := stripNr(byName["ioctl"])
		assert.Contains(t, ioctl, Row{Arch: arch, Syscall: "ioctl", Case: "arg1 == 0x5401 (TCGETS)", Action: "allow"})
		assert.Equal(t, Row{Arch: arch, Syscall: "ioctl", Case: "otherwise", Action: "kill"}, ioctl[len(ioctl)-1])
		// The compat ABI is a bad architecture.
		compat := byName[compatSyscall]
		require.Len(t, compat, 1)
		assert.Equal(t, "kill_thread", compat[0].Action)
	}
}

// TestTableMatchesEvaluation cross-checks argument cases with direct runs.
func TestTableMatchesEvaluation(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	prog, err := p.BPF("x86_64")
	require.NoError(t, err)
	a := mustArch(t, "x86_64")
	nr := func(name string) uint32 {
		n, ok := syscallNumber(name, a)
		require.True(t, ok)
		return uint32(n)
	}
	cases := []struct {
		name    string
		syscall string
		args    [6]uint64
		want    string
	}{
		{"TIOCSTI", "ioctl", [6]uint64{0, unix.TIOCSTI}, "kill"},
		{"TCGETS high bits ignored", "ioctl", [6]uint64{0, 1<<32 | unix.TCGETS}, "allow"},
		{"fork", "clone", [6]uint64{uint64(unix.SIGCHLD)}, "kill"},
		{"pthread", "clone", [6]uint64{0x3d0f00}, "allow"},
		{"go runtime thread", "clone", [6]uint64{0x50f00}, "allow"},
		{"thread into new netns", "clone", [6]uint64{0x3d0f00 | unix.CLONE_NEWNET}, "kill"},
		{"AF_UNIX", "socket", [6]uint64{unix.AF_UNIX}, "errno EPERM"},
		{"AF_INET", "socket", [6]uint64{unix.AF_INET}, "errno EPERM"},
		{"preadv2 no flags", "preadv2", [6]uint64{5: 0}, "allow"},
		{"preadv2 RWF_NOWAIT", "preadv2", [6]uint64{5: unix.RWF_NOWAIT}, "errno EPERM"},
		{"preadv2 high flag bits", "preadv2", [6]uint64{5: 1 << 32}, "errno EPERM"},
		{"madvise DONTNEED", "madvise", [6]uint64{2: unix.MADV_DONTNEED}, "allow"},
		{"madvise KEEPONFORK", "madvise", [6]uint64{2: unix.MADV_KEEPONFORK}, "allow"},
		{"madvise COLD", "madvise", [6]uint64{2: unix.MADV_COLD}, "errno EPERM"},
		{"madvise past the list", "madvise", [6]uint64{2: 0x20}, "errno EPERM"},
		{"madvise DONTNEED high bits", "madvise", [6]uint64{2: 1<<32 | unix.MADV_DONTNEED}, "errno EPERM"},
		{"mmap private anonymous", "mmap", [6]uint64{3: unix.MAP_PRIVATE | unix.MAP_ANONYMOUS}, "allow"},
		{"mmap shared file", "mmap", [6]uint64{3: unix.MAP_SHARED}, "allow"},
		{"mmap shared anonymous", "mmap", [6]uint64{3: unix.MAP_SHARED | unix.MAP_ANONYMOUS}, "errno EPERM"},
		{"F_SETLK", "fcntl", [6]uint64{0, unix.F_SETLK}, "errno ENOLCK"},
		{"F_SETOWN", "fcntl", [6]uint64{0, unix.F_SETOWN}, "kill"},
	}
	for _, tc := range cases {
		got, err := Evaluate(prog, "x86_64", nr(tc.syscall), tc.args)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.name)
	}
	// x32 and i386 calls are refused as a bad architecture.
	got, err := Evaluate(prog, "x86_64", 0x40000000, [6]uint64{})
	require.NoError(t, err)
	assert.Equal(t, "kill_thread", got)
}

func mustArch(t *testing.T, name string) archInfo {
	t.Helper()
	a, err := lookupArch(name)
	require.NoError(t, err)
	return a
}

func stripNr(rows []Row) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		r.Nr, r.Last, r.Reason = 0, 0, ""
		out[i] = r
	}
	return out
}

func TestDiff(t *testing.T) {
	old, err := Parse("old", []byte(header+"allow read : reading\nallow fstat : stat\n"))
	require.NoError(t, err)
	nw, err := Parse("new", []byte(header+"allow read : reading\nallow statx : stat\nallow ioctl if arg1 == TCGETS +sensitive : tty\n"))
	require.NoError(t, err)
	ot, err := old.Table("x86_64")
	require.NoError(t, err)
	nt, err := nw.Table("x86_64")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"- allow fstat (x86_64) : stat",
		"+ kill fstat (x86_64) : unknown calls are fatal",
		"- kill ioctl (x86_64) : unknown calls are fatal",
		"+ allow ioctl if arg1 == 0x5401 (TCGETS) (x86_64) : tty",
		"+ kill ioctl if arg1.hi == 0x0 && arg1 != 0x5401 (TCGETS) (x86_64) : unknown calls are fatal",
		"+ kill ioctl otherwise (x86_64) : unknown calls are fatal",
		"- kill statx (x86_64) : unknown calls are fatal",
		"+ allow statx (x86_64) : stat",
	}, Diff(ot, nt))
	assert.Empty(t, Diff(nt, nt))
}

func TestCompareLoadedSyntheticTail(t *testing.T) {
	golden := Table{Default: "kill", ENOSYSFrom: map[string]uint32{"x86_64": 3}, Rows: []Row{
		{Arch: "x86_64", Syscall: "read", Action: "allow", Nr: 0, Last: 0},
		{Arch: "x86_64", Syscall: "write", Action: "kill", Nr: 1, Last: 1},
		{Arch: "x86_64", Syscall: "open", Action: "kill", Nr: 2, Last: 2},
		{Arch: "x86_64", Syscall: "#3-#9", Action: "kill", Nr: 3, Last: 9},
		{Arch: "x86_64", Syscall: "#0x40000000", Action: "kill_thread", Nr: 0x40000000, Last: 0x40000000},
		{Arch: "i386", Syscall: "*", Action: "kill_thread"},
	}}
	withTail := func(from uint32) Table {
		lt := Table{Default: "kill"}
		for _, r := range golden.Rows {
			if r.Syscall == compatSyscall || r.Nr >= 0x40000000 {
				lt.Rows = append(lt.Rows, r)
				continue
			}
			for n := r.Nr; n <= r.Last; n++ {
				act := r.Action
				if n >= from {
					act = enosysAction
				}
				lt.Rows = append(lt.Rows, Row{Arch: r.Arch, Syscall: r.Syscall, Action: act, Nr: n, Last: n})
			}
		}
		return lt
	}
	assert.Empty(t, CompareLoaded(golden, withTail(3)))
	early := CompareLoaded(golden, withTail(2))
	assert.Equal(t, []string{"x86_64 open (nr 2): golden kill, loaded errno ENOSYS"}, early)
	late := CompareLoaded(golden, withTail(5))
	assert.Len(t, late, 2)
	assert.Contains(t, strings.Join(late, "\n"), "inside runc's ENOSYS tail but loaded answers kill")
	// Inferred tail (no ENOSYSFrom): a tail that shadows an allow is reported.
	inferred := golden
	inferred.ENOSYSFrom = nil
	assert.Empty(t, CompareLoaded(inferred, withTail(3)))
	shadow := CompareLoaded(inferred, withTail(0))
	assert.Contains(t, strings.Join(shadow, "\n"), "x86_64 read (nr 0): golden allow, loaded errno ENOSYS")
}

func TestDisassemble(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	prog, err := p.BPF("x86_64")
	require.NoError(t, err)
	lines := Disassemble(prog)
	require.Len(t, lines, len(prog))
	assert.Equal(t, "0000: ld  arch", lines[0])
	text := strings.Join(lines, "\n")
	assert.Contains(t, text, "ld  nr")
	assert.Contains(t, text, "ret #0x7fff0000  ; allow")
	assert.Contains(t, text, "; errno ENOSYS")
	assert.NotContains(t, text, "???")
}

// TestDisassembleLoads pins the rendering of every load form, including
// the ones no compiled policy uses.
func TestDisassembleLoads(t *testing.T) {
	for _, tc := range []struct {
		code uint16
		k    uint32
		want string
	}{
		{bpfLD | bpfW | bpfABS, 0, "ld  nr"},
		{bpfLD | bpfW | bpfABS, 3, "ld  [0x3]"},
		{bpfLD | bpfW | bpfABS, 4 * seccompDataWords, fmt.Sprintf("ld  [%#x]", 4*seccompDataWords)},
		{bpfLD | bpfIMM, 7, "ld  #0x7"},
		{bpfLD | bpfLEN, 0, "ld  #len"},
		{bpfLD | bpfMEM, 2, "ld  M[2]"},
		{bpfLDX | bpfIMM, 7, "ldx #0x7"},
		{bpfLDX | bpfLEN, 0, "ldx #len"},
		{bpfLDX | bpfMEM, 2, "ldx M[2]"},
		{bpfLDX | bpfW | bpfABS, 0, "??? code=0x21 jt=0 jf=0 k=0x0"},
	} {
		assert.Equal(t, tc.want, disasmOne(0, ins(tc.code, 0, 0, tc.k)), "code %#x k %d", tc.code, tc.k)
	}
}

// TestDecodeRefusesPartialTables: a filter with more argument paths than the
// search explores is an error, never a silently partial table.
func TestDecodeRefusesPartialTables(t *testing.T) {
	prog := []unix.SockFilter{ins(bpfLD|bpfW|bpfABS, 0, 0, 16)}
	for i := 0; i < 12; i++ {
		prog = append(prog, ins(bpfJMP|bpfJSET|bpfK, 0, 0, 1<<i))
	}
	prog = append(prog, ins(bpfRET|bpfK, 0, 0, retAllow))
	_, err := DecodeFilter("x86_64", prog)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "table would be partial")
}

// TestDecodeRefusesHiddenArgumentLogic: arguments routed through scratch
// memory, arithmetic, X or the return value could hide a path from the
// search, so such filters are refused.
func TestDecodeRefusesHiddenArgumentLogic(t *testing.T) {
	ret := func(k uint32) unix.SockFilter { return ins(bpfRET|bpfK, 0, 0, k) }
	cases := map[string][]unix.SockFilter{
		"scratch memory": {ins(bpfLD|bpfW|bpfABS, 0, 0, 16), ins(bpfST, 0, 0, 0), ins(bpfLD|bpfMEM, 0, 0, 0),
			ins(bpfJMP|bpfJEQ|bpfK, 0, 1, 0x1337), ret(retAllow), ret(retKillProcess)},
		"arithmetic": {ins(bpfLD|bpfW|bpfABS, 0, 0, 16), ins(bpfALU|bpfADD|bpfK, 0, 0, 1),
			ins(bpfJMP|bpfJEQ|bpfK, 0, 1, 0x1338), ret(retAllow), ret(retKillProcess)},
		"x register": {ins(bpfLD|bpfW|bpfABS, 0, 0, 16), ins(bpfMISC|bpfTAX, 0, 0, 0), ins(bpfLD|bpfIMM, 0, 0, 0x1337),
			ins(bpfJMP|bpfJEQ|bpfX, 0, 1, 0), ret(retAllow), ret(retKillProcess)},
		"return a": {ins(bpfLD|bpfW|bpfABS, 0, 0, 16), ins(bpfRET|bpfA, 0, 0, 0)},
	}
	for name, prog := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeFilter("x86_64", prog)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "table would be partial")
		})
	}
	// Masking alone is fine: the path is found and described.
	tb, err := DecodeFilter("x86_64", []unix.SockFilter{
		ins(bpfLD|bpfW|bpfABS, 0, 0, 0), ins(bpfJMP|bpfJEQ|bpfK, 0, 4, 16),
		ins(bpfLD|bpfW|bpfABS, 0, 0, 24), ins(bpfALU|bpfAND|bpfK, 0, 0, 0xff), ins(bpfJMP|bpfJEQ|bpfK, 0, 1, 0x13),
		ret(retAllow), ret(retKillProcess)})
	require.NoError(t, err)
	var ioctl []Row
	for _, r := range tb.Rows {
		if r.Syscall == "ioctl" {
			ioctl = append(ioctl, r)
		}
	}
	assert.Equal(t, []Row{
		{Arch: "x86_64", Syscall: "ioctl", Case: "arg1 & 0xff == 0x13", Action: "allow", Nr: 16, Last: 16},
		{Arch: "x86_64", Syscall: "ioctl", Case: "otherwise", Action: "kill", Nr: 16, Last: 16},
	}, ioctl)
}
