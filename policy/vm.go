package policy

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Classic BPF opcode fields (linux/filter.h, linux/bpf_common.h).
const (
	bpfLD   = 0x00
	bpfLDX  = 0x01
	bpfST   = 0x02
	bpfSTX  = 0x03
	bpfALU  = 0x04
	bpfJMP  = 0x05
	bpfRET  = 0x06
	bpfMISC = 0x07

	bpfW   = 0x00
	bpfIMM = 0x00
	bpfABS = 0x20
	bpfMEM = 0x60
	bpfLEN = 0x80

	bpfADD = 0x00
	bpfSUB = 0x10
	bpfMUL = 0x20
	bpfDIV = 0x30
	bpfOR  = 0x40
	bpfAND = 0x50
	bpfLSH = 0x60
	bpfRSH = 0x70
	bpfNEG = 0x80
	bpfMOD = 0x90
	bpfXOR = 0xa0

	bpfJA   = 0x00
	bpfJEQ  = 0x10
	bpfJGT  = 0x20
	bpfJGE  = 0x30
	bpfJSET = 0x40

	bpfK = 0x00
	bpfX = 0x08
	bpfA = 0x10

	bpfTAX = 0x00
	bpfTXA = 0x80

	bpfMemWords = 16
)

// seccomp return values (linux/seccomp.h).
const (
	retKillProcess = 0x80000000
	retKillThread  = 0x00000000
	retTrap        = 0x00030000
	retErrno       = 0x00050000
	retUserNotif   = 0x7fc00000
	retTrace       = 0x7ff00000
	retLog         = 0x7ffc0000
	retAllow       = 0x7fff0000
	retActionFull  = 0xffff0000
	retData        = 0x0000ffff
	maxErrno       = 4095
)

// seccompDataWords is sizeof(struct seccomp_data) / 4: nr, arch, ip (2),
// args (6 x 2), little-endian word order.
const seccompDataWords = 16

// data is struct seccomp_data as 32-bit words in host (little-endian) order:
// 0 nr, 1 arch, 2-3 instruction pointer, 4+2i / 5+2i low / high half of arg i.
type data [seccompDataWords]uint32

// wordName names a seccomp_data word for case labels and disassembly.
func wordName(w int) string {
	switch {
	case w == 0:
		return "nr"
	case w == 1:
		return "arch"
	case w == 2:
		return "ip"
	case w == 3:
		return "ip.hi"
	case w%2 == 0:
		return fmt.Sprintf("arg%d", (w-4)/2)
	default:
		return fmt.Sprintf("arg%d.hi", (w-4)/2)
	}
}

// branch is one conditional jump taken on a value derived from a word of
// seccomp_data; the explorer flips these to find every path.
type branch struct {
	pc    int
	word  int
	mask  uint32
	op    uint16 // bpfJEQ, bpfJGT, bpfJGE, bpfJSET
	k     uint32
	taken bool
}

// provenance tracks where the accumulator's value came from.
type provenance struct {
	word int // -1: not a plain data word
	mask uint32
}

// validate checks the program the way the kernel's seccomp checker does:
// known opcodes, aligned in-bounds loads, forward jumps that stay inside the
// program, scratch memory in range, and a return at the end of every path.
func validate(prog []unix.SockFilter) error {
	if len(prog) == 0 {
		return errEmptyProgram
	}
	if len(prog) > MaxBPFInstructions {
		return fmt.Errorf("program has %d instructions; the kernel allows %d", len(prog), MaxBPFInstructions)
	}
	for pc, ins := range prog {
		class := ins.Code & 0x07
		switch class {
		case bpfLD, bpfLDX:
			mode := ins.Code & 0xe0
			size := ins.Code & 0x18
			switch {
			case mode == bpfABS && class == bpfLD && size == bpfW:
				if ins.K%4 != 0 || ins.K >= 4*seccompDataWords {
					return fmt.Errorf("pc %d: load of seccomp_data offset %d", pc, ins.K)
				}
			case mode == bpfIMM && size == bpfW, mode == bpfLEN && size == bpfW:
			case mode == bpfMEM && size == bpfW:
				if ins.K >= bpfMemWords {
					return fmt.Errorf("pc %d: scratch memory slot %d", pc, ins.K)
				}
			default:
				return fmt.Errorf("pc %d: load opcode %#x not allowed in seccomp", pc, ins.Code)
			}
		case bpfST, bpfSTX:
			if ins.Code&^0x07 != 0 || ins.K >= bpfMemWords {
				return fmt.Errorf("pc %d: bad store %#x slot %d", pc, ins.Code, ins.K)
			}
		case bpfALU:
			op := ins.Code & 0xf0
			if op > bpfXOR {
				return fmt.Errorf("pc %d: alu opcode %#x", pc, ins.Code)
			}
			if (op == bpfDIV || op == bpfMOD) && ins.Code&bpfX == 0 && ins.K == 0 {
				return fmt.Errorf("pc %d: division by constant zero", pc)
			}
		case bpfJMP:
			op := ins.Code & 0xf0
			if op == bpfJA {
				if uint64(pc)+1+uint64(ins.K) >= uint64(len(prog)) {
					return fmt.Errorf("pc %d: jump out of program", pc)
				}
				continue
			}
			if op > bpfJSET {
				return fmt.Errorf("pc %d: jump opcode %#x", pc, ins.Code)
			}
			if pc+1+int(ins.Jt) >= len(prog) || pc+1+int(ins.Jf) >= len(prog) {
				return fmt.Errorf("pc %d: jump out of program", pc)
			}
		case bpfRET:
			if rv := ins.Code & 0x18; rv != bpfK && rv != bpfA {
				return fmt.Errorf("pc %d: return opcode %#x", pc, ins.Code)
			}
		case bpfMISC:
			if m := ins.Code & 0xf8; m != bpfTAX && m != bpfTXA {
				return fmt.Errorf("pc %d: misc opcode %#x", pc, ins.Code)
			}
		}
	}
	last := prog[len(prog)-1]
	if last.Code&0x07 != bpfRET {
		return fmt.Errorf("program does not end with a return")
	}
	return nil
}

// run executes a validated program on d and returns the seccomp return value
// and the data-dependent branches it took, in order. opaque is set when the
// outcome depends on argument data in a way the explorer cannot enumerate:
// a comparison or return of a value computed from an argument by anything
// other than masking (arithmetic, scratch memory, the X register). Tables
// refuse such programs rather than miss paths.
func run(prog []unix.SockFilter, d *data) (ret uint32, trace []branch, opaque bool) {
	var a, x uint32
	var mem [bpfMemWords]uint32
	// Taint: the value depends on a syscall argument or the instruction pointer.
	var aT, xT bool
	var memT [bpfMemWords]bool
	prov := provenance{word: -1}
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		switch ins.Code & 0x07 {
		case bpfLD:
			switch ins.Code & 0xe0 {
			case bpfABS:
				w := int(ins.K / 4)
				a, prov, aT = d[w], provenance{word: w, mask: 0xffffffff}, w >= 2
			case bpfIMM:
				a, prov, aT = ins.K, provenance{word: -1}, false
			case bpfLEN:
				a, prov, aT = 4*seccompDataWords, provenance{word: -1}, false
			case bpfMEM:
				a, prov, aT = mem[ins.K], provenance{word: -1}, memT[ins.K]
			}
		case bpfLDX:
			switch ins.Code & 0xe0 {
			case bpfIMM:
				x, xT = ins.K, false
			case bpfLEN:
				x, xT = 4*seccompDataWords, false
			case bpfMEM:
				x, xT = mem[ins.K], memT[ins.K]
			}
		case bpfST:
			mem[ins.K], memT[ins.K] = a, aT
		case bpfSTX:
			mem[ins.K], memT[ins.K] = x, xT
		case bpfALU:
			src := ins.K
			if ins.Code&bpfX != 0 {
				src = x
				aT = aT || xT
			}
			op := ins.Code & 0xf0
			if op == bpfAND && ins.Code&bpfX == 0 && prov.word >= 0 {
				prov.mask &= src
			} else {
				prov = provenance{word: -1}
			}
			a = alu(op, a, src)
		case bpfJMP:
			op := ins.Code & 0xf0
			if op == bpfJA {
				pc += int(ins.K)
				continue
			}
			src := ins.K
			if ins.Code&bpfX != 0 {
				src = x
			}
			var taken bool
			switch op {
			case bpfJEQ:
				taken = a == src
			case bpfJGT:
				taken = a > src
			case bpfJGE:
				taken = a >= src
			case bpfJSET:
				taken = a&src != 0
			}
			switch {
			case ins.Code&bpfX != 0 && (aT || xT):
				opaque = true
			case aT && prov.word >= 2:
				trace = append(trace, branch{pc: pc, word: prov.word, mask: prov.mask, op: op, k: src, taken: taken})
			case aT:
				opaque = true
			}
			if taken {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case bpfRET:
			if ins.Code&0x18 == bpfA {
				return a, trace, opaque || aT
			}
			return ins.K, trace, opaque
		case bpfMISC:
			if ins.Code&0xf8 == bpfTAX {
				x, xT = a, aT
			} else {
				a, prov, aT = x, provenance{word: -1}, xT
			}
		}
	}
	// validate guarantees a final return; unreachable for validated programs.
	return retKillProcess, trace, true
}

func alu(op uint16, a, src uint32) uint32 {
	switch op {
	case bpfADD:
		return a + src
	case bpfSUB:
		return a - src
	case bpfMUL:
		return a * src
	case bpfDIV:
		if src == 0 {
			return 0
		}
		return a / src
	case bpfMOD:
		if src == 0 {
			return 0
		}
		return a % src
	case bpfOR:
		return a | src
	case bpfAND:
		return a & src
	case bpfLSH:
		if src >= 32 {
			return 0
		}
		return a << src
	case bpfRSH:
		if src >= 32 {
			return 0
		}
		return a >> src
	case bpfNEG:
		return -a
	case bpfXOR:
		return a ^ src
	}
	return a
}

// ActionString names a seccomp return value the way tables print it:
// allow, kill, kill_thread, errno NAME, trap, log, trace N, user_notif.
func ActionString(ret uint32) string {
	switch ret & retActionFull {
	case retKillProcess:
		return "kill"
	case retKillThread:
		return "kill_thread"
	case retTrap:
		return "trap"
	case retErrno:
		e := ret & retData
		if e > maxErrno {
			e = maxErrno
		}
		return "errno " + errnoName(syscall.Errno(e))
	case retUserNotif:
		return "user_notif"
	case retTrace:
		return fmt.Sprintf("trace %d", ret&retData)
	case retLog:
		return "log"
	case retAllow:
		return "allow"
	}
	// The kernel treats unknown actions as kill-process.
	return fmt.Sprintf("kill (unknown action %#x)", ret)
}

// Evaluate runs prog on one system call and returns the action it takes.
// args are the six syscall arguments.
func Evaluate(prog []unix.SockFilter, arch string, nr uint32, args [6]uint64) (string, error) {
	a, err := lookupArch(arch)
	if err != nil {
		return "", err
	}
	if err := validate(prog); err != nil {
		return "", err
	}
	d := data{0: nr, 1: a.audit}
	for i, v := range args {
		d[4+2*i], d[5+2*i] = uint32(v), uint32(v>>32)
	}
	ret, _, _ := run(prog, &d)
	return ActionString(ret), nil
}
