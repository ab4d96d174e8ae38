package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/runc/libcontainer/configs"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// MaxBPFInstructions is the kernel's BPF_MAXINSNS.
const MaxBPFInstructions = 4096

// BPF compiles the policy for arch through libseccomp, building the filter
// exactly as runc v1.5's seccomp.InitSeccomp does from Libcontainer's
// configuration (same default, architectures, optimisation level and rule
// order). It is the program runc hands to patchbpf, before patchbpf prepends
// its ENOSYS stub.
func (p *Policy) BPF(arch string) ([]unix.SockFilter, error) {
	a, err := lookupArch(arch)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	if !p.HasArch(a.name) {
		return nil, fmt.Errorf("policy %s: architecture %s is not in the header", p.Name, a.name)
	}
	f, err := p.filter(a, treeAuto)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	prog, err := exportBPF(f)
	if err != nil {
		return nil, fmt.Errorf("policy %s (%s): %w", p.Name, a.name, err)
	}
	return prog, nil
}

// scmpAction maps a libcontainer action the way runc does.
func scmpAction(act configs.Action, errno *uint) (libseccomp.ScmpAction, error) {
	switch act {
	case configs.Allow:
		return libseccomp.ActAllow, nil
	case configs.KillProcess:
		return libseccomp.ActKillProcess, nil
	case configs.Errno:
		code := uint(unix.EPERM)
		if errno != nil {
			code = *errno
		}
		return libseccomp.ActErrno.SetReturnCode(int16(code)), nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("unsupported action %v", act)
}

var scmpOps = map[configs.Operator]libseccomp.ScmpCompareOp{
	configs.EqualTo: libseccomp.CompareEqual, configs.NotEqualTo: libseccomp.CompareNotEqual,
	configs.GreaterThan: libseccomp.CompareGreater, configs.GreaterThanOrEqualTo: libseccomp.CompareGreaterEqual,
	configs.LessThan: libseccomp.CompareLess, configs.LessThanOrEqualTo: libseccomp.CompareLessOrEqual,
	configs.MaskEqualTo: libseccomp.CompareMaskedEqual,
}

// treeMode selects libseccomp's binary-tree optimisation.
type treeMode int

const (
	treeAuto treeMode = iota // as runc: on above 32 rules
	treeOff                  // linear (benchmarks only)
)

// filter builds the libseccomp filter for arch. The caller releases it.
func (p *Policy) filter(a archInfo, tree treeMode) (*libseccomp.ScmpFilter, error) {
	cfg := p.libcontainerFor(a)
	def, err := scmpAction(cfg.DefaultAction, cfg.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("policy %s: default: %w", p.Name, err)
	}
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("policy %s: new filter: %w", p.Name, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Release()
		}
	}()
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil, fmt.Errorf("policy %s: native arch: %w", p.Name, err)
	}
	if err := f.AddArch(a.scmp); err != nil {
		return nil, fmt.Errorf("policy %s: add arch %s: %w", p.Name, a.name, err)
	}
	if a.scmp != native {
		// Cross-compiling a table: the filter holds the target arch only,
		// as it would on a host of that arch.
		if err := f.RemoveArch(native); err != nil {
			return nil, fmt.Errorf("policy %s: remove native arch: %w", p.Name, err)
		}
	}
	// runc enables libseccomp's binary tree above 32 rules.
	if len(cfg.Syscalls) > 32 && tree == treeAuto {
		if err := f.SetOptimize(2); err != nil {
			return nil, fmt.Errorf("policy %s: binary tree optimisation: %w", p.Name, err)
		}
	}
	if err := f.SetNoNewPrivsBit(false); err != nil {
		return nil, fmt.Errorf("policy %s: no_new_privs bit: %w", p.Name, err)
	}
	for _, sc := range cfg.Syscalls {
		act, err := scmpAction(sc.Action, sc.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %s: %w", p.Name, sc.Name, err)
		}
		if act == def {
			continue // runc skips rules that repeat the default
		}
		// libseccomp takes native numbers (or its pseudo numbers for calls
		// the native arch lacks) and translates them per filter arch.
		nr, err := libseccomp.GetSyscallFromName(sc.Name)
		if err != nil {
			return nil, fmt.Errorf("policy %s: resolve %s: %w", p.Name, sc.Name, err)
		}
		if len(sc.Args) == 0 {
			err = f.AddRule(nr, act)
		} else {
			conds := make([]libseccomp.ScmpCondition, 0, len(sc.Args))
			for _, arg := range sc.Args {
				cond, cerr := libseccomp.MakeCondition(arg.Index, scmpOps[arg.Op], arg.Value, arg.ValueTwo)
				if cerr != nil {
					return nil, fmt.Errorf("policy %s: %s condition: %w", p.Name, sc.Name, cerr)
				}
				conds = append(conds, cond)
			}
			err = f.AddRuleConditional(nr, act, conds)
		}
		if err != nil {
			return nil, fmt.Errorf("policy %s: add rule %s: %w", p.Name, sc.Name, err)
		}
	}
	ok = true
	return f, nil
}

// exportBPF writes the filter's program to a memfd and reads it back
// (ExportBPFMem needs libseccomp 2.6).
func exportBPF(f *libseccomp.ScmpFilter) ([]unix.SockFilter, error) {
	fd, err := unix.MemfdCreate("awf-policy-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	file := os.NewFile(uintptr(fd), "awf-policy-bpf")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, fmt.Errorf("export bpf: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind bpf: %w", err)
	}
	raw, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("read bpf: %w", err)
	}
	return DecodeProgram(raw)
}

// DecodeProgram parses a raw classic-BPF program in host byte order (8 bytes
// per instruction), as libseccomp exports it.
func DecodeProgram(raw []byte) ([]unix.SockFilter, error) {
	if len(raw)%8 != 0 {
		return nil, fmt.Errorf("bpf program is %d bytes, not a multiple of 8", len(raw))
	}
	n := len(raw) / 8
	if n == 0 || n > MaxBPFInstructions {
		return nil, fmt.Errorf("bpf program has %d instructions (want 1..%d)", n, MaxBPFInstructions)
	}
	prog := make([]unix.SockFilter, n)
	for i := range prog {
		b := raw[i*8:]
		prog[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(b[0:]),
			Jt:   b[2],
			Jf:   b[3],
			K:    binary.NativeEndian.Uint32(b[4:]),
		}
	}
	return prog, nil
}

// EncodeProgram is the inverse of DecodeProgram.
func EncodeProgram(prog []unix.SockFilter) []byte {
	out := make([]byte, 8*len(prog))
	for i, ins := range prog {
		b := out[i*8:]
		binary.NativeEndian.PutUint16(b[0:], ins.Code)
		b[2], b[3] = ins.Jt, ins.Jf
		binary.NativeEndian.PutUint32(b[4:], ins.K)
	}
	return out
}

// ProgramSHA256 is "sha256:HEX" of the program's bytes.
func ProgramSHA256(prog []unix.SockFilter) string {
	sum := sha256.Sum256(EncodeProgram(prog))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// LibseccompVersion is the version of the libseccomp the compiler links.
func LibseccompVersion() string {
	major, minor, micro := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("%d.%d.%d", major, minor, micro)
}

var errEmptyProgram = errors.New("empty bpf program")
