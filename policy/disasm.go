package policy

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Disassemble renders a seccomp classic-BPF program one instruction per line,
// naming seccomp_data fields (nr, arch, argN, argN.hi) and return actions.
func Disassemble(prog []unix.SockFilter) []string {
	out := make([]string, len(prog))
	for pc, ins := range prog {
		out[pc] = fmt.Sprintf("%04d: %s", pc, disasmOne(pc, ins))
	}
	return out
}

var aluNames = map[uint16]string{
	bpfADD: "add", bpfSUB: "sub", bpfMUL: "mul", bpfDIV: "div", bpfOR: "or", bpfAND: "and",
	bpfLSH: "lsh", bpfRSH: "rsh", bpfNEG: "neg", bpfMOD: "mod", bpfXOR: "xor",
}

var jmpNames = map[uint16]string{bpfJEQ: "jeq", bpfJGT: "jgt", bpfJGE: "jge", bpfJSET: "jset"}

func disasmOne(pc int, ins unix.SockFilter) string {
	k := fmt.Sprintf("%#x", ins.K)
	switch ins.Code & 0x07 {
	case bpfLD, bpfLDX:
		// ld and ldx share the immediate, length and scratch modes; only ld
		// reads seccomp_data (bpfABS).
		op := "ld  "
		if ins.Code&0x07 == bpfLDX {
			op = "ldx "
		}
		switch mode := ins.Code & 0xe0; {
		case mode == bpfABS && op == "ld  ":
			if ins.K%4 == 0 && ins.K < 4*seccompDataWords {
				return op + wordName(int(ins.K/4))
			}
			return op + "[" + k + "]"
		case mode == bpfIMM:
			return op + "#" + k
		case mode == bpfLEN:
			return op + "#len"
		case mode == bpfMEM:
			return fmt.Sprintf("%sM[%d]", op, ins.K)
		}
	case bpfST:
		return fmt.Sprintf("st  M[%d]", ins.K)
	case bpfSTX:
		return fmt.Sprintf("stx M[%d]", ins.K)
	case bpfALU:
		name := aluNames[ins.Code&0xf0]
		if ins.Code&0xf0 == bpfNEG {
			return name
		}
		if ins.Code&bpfX != 0 {
			return name + " x"
		}
		return name + " #" + k
	case bpfJMP:
		if ins.Code&0xf0 == bpfJA {
			return fmt.Sprintf("ja  %d", pc+1+int(ins.K))
		}
		src := "#" + k
		if ins.Code&bpfX != 0 {
			src = "x"
		}
		return fmt.Sprintf("%-4s %s, %d, %d", jmpNames[ins.Code&0xf0], src, pc+1+int(ins.Jt), pc+1+int(ins.Jf))
	case bpfRET:
		if ins.Code&0x18 == bpfA {
			return "ret a"
		}
		return fmt.Sprintf("ret #%#08x  ; %s", ins.K, ActionString(ins.K))
	case bpfMISC:
		if ins.Code&0xf8 == bpfTAX {
			return "tax"
		}
		return "txa"
	}
	return fmt.Sprintf("??? code=%#x jt=%d jf=%d k=%#x", ins.Code, ins.Jt, ins.Jf, ins.K)
}
