package policy

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// maxRunsPerSyscall bounds the path search for one syscall number.
const maxRunsPerSyscall = 512

// outcome is one path through the filter for one syscall number: the
// argument conditions that lead to it and the action it returns.
type outcome struct {
	cond      string
	otherwise bool // only "!=" tests: every value the other paths name is excluded
	action    string
	// args are the syscall arguments of the first run that took this path.
	args [6]uint64
}

// argsOf reads the six 64-bit arguments out of seccomp_data words.
func argsOf(d [seccompDataWords]uint32) [6]uint64 {
	var a [6]uint64
	for i := range a {
		a[i] = uint64(d[5+2*i])<<32 | uint64(d[4+2*i])
	}
	return a
}

// explore finds every path the filter can take for syscall nr on arch by
// running it on concrete arguments and flipping, one at a time, each branch
// that depended on an argument word. libseccomp compares each 32-bit half of
// an argument against constants (after an optional mask), so flipping one
// comparison at a time reaches every rule.
//
// complete is false when the search hit maxRunsPerSyscall with paths left
// to try, or when the program computes with argument values (see run);
// callers must not trust a partial table.
func explore(prog []unix.SockFilter, audit uint32, nr uint32, label func(word int, v uint32) string) (outs []outcome, complete bool) {
	type assign [seccompDataWords]uint32
	seenAssign := map[assign]bool{}
	seenPath := map[string]bool{}
	var out []outcome
	queue := []assign{{}}
	for runs := 0; len(queue) > 0; {
		cur := queue[0]
		queue = queue[1:]
		if seenAssign[cur] {
			continue
		}
		if runs == maxRunsPerSyscall {
			return out, false
		}
		seenAssign[cur] = true
		runs++
		d := data(cur)
		d[0], d[1] = nr, audit
		ret, trace, opaque := run(prog, &d)
		if opaque {
			return out, false
		}
		sig := pathSignature(trace)
		if !seenPath[sig] {
			seenPath[sig] = true
			cond, neOnly := describePath(trace, label)
			out = append(out, outcome{cond: cond, otherwise: neOnly, action: ActionString(ret), args: argsOf(cur)})
		}
		for _, b := range trace {
			v, ok := flip(b, cur[b.word], trace)
			if !ok {
				continue
			}
			next := cur
			next[b.word] = v
			if !seenAssign[next] {
				queue = append(queue, next)
			}
		}
	}
	return out, true
}

// testedEqual reports whether the path compares word (under mask) for
// equality with v.
func testedEqual(trace []branch, word int, mask, v uint32) bool {
	for _, b := range trace {
		if b.op == bpfJEQ && b.word == word && b.mask == mask && b.k == v {
			return true
		}
	}
	return false
}

func pathSignature(trace []branch) string {
	var b strings.Builder
	for _, br := range trace {
		fmt.Fprintf(&b, "%d:%t ", br.pc, br.taken)
	}
	return b.String()
}

// flip returns a value for b's word that makes b go the other way. To leave
// an equality it picks, where it can, a value that no other equality of the
// same path tests on that word: after "== 0x0 .. == 0x13" the path that
// misses every listed value (and reaches a later "> 0x13") is found too.
func flip(b branch, cur uint32, trace []branch) (uint32, bool) {
	m, k := b.mask, b.k
	switch b.op {
	case bpfJEQ:
		if b.taken {
			if m == 0 {
				return 0, false
			}
			for rest := m; rest != 0; rest &= rest - 1 {
				if v := k ^ (rest & -rest); !testedEqual(trace, b.word, m, v&m) {
					return v, true
				}
			}
			return k ^ (m & -m), true
		}
		if k&^m != 0 {
			return 0, false
		}
		return k, true
	case bpfJGT:
		if b.taken {
			return k, true
		}
		if k == 0xffffffff {
			return 0, false
		}
		return k + 1, true
	case bpfJGE:
		if b.taken {
			if k == 0 {
				return 0, false
			}
			return k - 1, true
		}
		return k, true
	case bpfJSET:
		if b.taken {
			return cur &^ (k & m), true
		}
		if k&m == 0 {
			return 0, false
		}
		return cur | (k & m), true
	}
	return 0, false
}

// describePath renders the argument conditions along a path, dropping
// comparisons that cannot fail (a zero mask compared with zero), repeats, and
// "!=" tests implied by an "==" test on the same word and mask. neOnly
// reports that only "!=" tests remain: the path is the "otherwise" case.
func describePath(trace []branch, label func(word int, v uint32) string) (string, bool) {
	type wm struct {
		word int
		mask uint32
	}
	eq := map[wm]bool{}
	// fullEq holds the value of each word tested "== K" without a mask, so
	// the two halves of a 64-bit equality read as one comparison.
	fullEq := map[int]uint32{}
	for _, b := range trace {
		if b.op == bpfJEQ && b.taken {
			eq[wm{b.word, b.mask}] = true
			if b.mask == 0xffffffff {
				fullEq[b.word] = b.k
			}
		}
	}
	// above holds, per word and mask, the bound of a "> K" (K+1 for
	// ">= K") the path took: "!= v" tests with v below it are implied.
	above := map[wm]uint32{}
	for _, b := range trace {
		switch {
		case b.op == bpfJGT && b.taken && b.k < 0xffffffff:
			above[wm{b.word, b.mask}] = max(above[wm{b.word, b.mask}], b.k+1)
		case b.op == bpfJGE && b.taken:
			above[wm{b.word, b.mask}] = max(above[wm{b.word, b.mask}], b.k)
		}
	}
	var parts []string
	seen := map[string]bool{}
	neOnly := true
	for _, b := range trace {
		if b.op == bpfJEQ && !b.taken && eq[wm{b.word, b.mask}] {
			continue
		}
		if lb, ok := above[wm{b.word, b.mask}]; ok && b.op == bpfJEQ && !b.taken && b.k < lb {
			continue
		}
		if _, ok := fullEq[b.word]; ok && b.mask == 0xffffffff && !(b.op == bpfJEQ && b.taken) {
			// The word's value is known exactly; any other test on it is implied.
			continue
		}
		s, ok := describeBranch(b, label)
		if b.op == bpfJEQ && b.taken && b.mask == 0xffffffff && b.word >= 4 {
			lo, hi := b.word&^1, b.word|1
			loV, hasLo := fullEq[lo]
			hiV, hasHi := fullEq[hi]
			if hasLo && hasHi {
				if b.word == hi {
					continue // described with the low half
				}
				s = fmt.Sprintf("%s == %#x", wordName(lo), uint64(hiV)<<32|uint64(loV))
				if l := label(lo, loV); l != "" && hiV == 0 {
					s += " (" + l + ")"
				}
			}
		}
		if !ok || seen[s] {
			continue
		}
		if b.op != bpfJEQ || b.taken {
			neOnly = false
		}
		seen[s] = true
		parts = append(parts, s)
	}
	return strings.Join(parts, " && "), neOnly && len(parts) > 0
}

func describeBranch(b branch, label func(word int, v uint32) string) (string, bool) {
	lhs := wordName(b.word)
	if b.mask == 0 {
		return "", false // the value is masked away: always 0
	}
	if b.mask != 0xffffffff {
		lhs = fmt.Sprintf("%s & %#x", lhs, b.mask)
	}
	val := fmt.Sprintf("%#x", b.k)
	if b.op == bpfJEQ {
		if l := label(b.word, b.k); l != "" {
			val += " (" + l + ")"
		}
	}
	switch b.op {
	case bpfJEQ:
		if b.taken {
			return lhs + " == " + val, true
		}
		return lhs + " != " + val, true
	case bpfJGT:
		if b.taken {
			return lhs + " > " + val, true
		}
		return lhs + " <= " + val, true
	case bpfJGE:
		if b.taken {
			return lhs + " >= " + val, true
		}
		return lhs + " < " + val, true
	case bpfJSET:
		if b.taken {
			return fmt.Sprintf("%s & %#x != 0", lhs, b.k), true
		}
		return fmt.Sprintf("%s & %#x == 0", lhs, b.k), true
	}
	return "", false
}

// nrProbes lists the syscall numbers to evaluate: every number below 1024
// plus, around each larger constant the program compares the number with,
// the constant and its neighbours (the x32 bit, for example).
func nrProbes(prog []unix.SockFilter) []uint32 {
	set := map[uint32]bool{0xffffffff: true}
	nrLoaded := false
	for _, ins := range prog {
		switch ins.Code & 0x07 {
		case bpfLD, bpfALU, bpfMISC:
			nrLoaded = ins.Code == bpfLD|bpfW|bpfABS && ins.K == 0
		case bpfJMP:
			if nrLoaded && ins.Code&0xf0 != bpfJA && ins.Code&bpfX == 0 && ins.K >= probeLimit {
				set[ins.K] = true
				set[ins.K-1] = true
				if ins.K != 0xffffffff {
					set[ins.K+1] = true
				}
			}
		}
	}
	out := make([]uint32, 0, probeLimit+len(set))
	for n := uint32(0); n < probeLimit; n++ {
		out = append(out, n)
	}
	extra := make([]uint32, 0, len(set))
	for n := range set {
		if n >= probeLimit {
			extra = append(extra, n)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	return append(out, extra...)
}

// probeLimit: every syscall number below it is evaluated one by one.
const probeLimit = 1024
