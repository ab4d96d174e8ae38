package policy

import (
	"fmt"
	"sort"
)

// enosysAction is what runc's patchbpf stub returns above the highest
// syscall number a configuration names.
const enosysAction = "errno ENOSYS"

// numberedKey identifies one syscall number and argument case of a table.
type numberedKey struct {
	arch string
	nr   uint32
	cas  string
}

// expand maps every syscall number a table covers (ranges unrolled) to its
// row, and collects the compat rows by arch.
func expand(t Table) (map[numberedKey]Row, map[string]Row) {
	nums := map[numberedKey]Row{}
	compat := map[string]Row{}
	for _, r := range t.Rows {
		if r.Syscall == compatSyscall {
			compat[r.Arch] = r
			continue
		}
		for n := uint64(r.Nr); n <= uint64(r.Last); n++ {
			nums[numberedKey{r.Arch, uint32(n), r.Case}] = r
		}
	}
	return nums, compat
}

// x32Bit reports whether nr belongs to another ABI of arch (x32 on x86_64);
// runc's stub hands such numbers to the filter unchanged.
func otherABI(arch string, nr uint32) bool {
	a, err := lookupArch(arch)
	return err == nil && a.x32Bit != 0 && nr&a.x32Bit != 0
}

// CompareLoaded lists every difference between the golden table and a loaded
// filter's table, other than the documented additions runc makes.
//
// runc v1.5's patchbpf prepends a stub that returns ENOSYS for every syscall
// number above the highest one the configuration names (on x86_64, only for
// numbers without the x32 bit). So where the golden table has the default
// action and the loaded one has ENOSYS, the difference is accepted if it is
// exactly such a tail: it starts above every number the golden table does not
// leave to the default, and every number above its start (of the native ABI)
// answers ENOSYS in the loaded table. Anything else is reported.
func CompareLoaded(golden, loaded Table) []string {
	gn, gc := expand(golden)
	ln, lc := expand(loaded)
	var diffs []string

	// Find the tail start per arch: the lowest number where golden has the
	// default and loaded has ENOSYS.
	tail := map[string]uint32{}
	for k, lr := range ln {
		if _, exact := golden.ENOSYSFrom[k.arch]; exact {
			continue
		}
		gr, ok := gn[k]
		if !ok || otherABI(k.arch, k.nr) || lr.Action != enosysAction || gr.Action == enosysAction || gr.Action != golden.Default {
			continue
		}
		if cur, seen := tail[k.arch]; !seen || k.nr < cur {
			tail[k.arch] = k.nr
		}
	}
	for arch, from := range golden.ENOSYSFrom {
		tail[arch] = from
	}
	inTail := func(k numberedKey) bool {
		start, ok := tail[k.arch]
		return ok && k.nr >= start && !otherABI(k.arch, k.nr)
	}

	keys := make([]numberedKey, 0, len(gn)+len(ln))
	for k := range gn {
		keys = append(keys, k)
	}
	for k := range ln {
		if _, ok := gn[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.arch != b.arch {
			return a.arch < b.arch
		}
		if a.nr != b.nr {
			return a.nr < b.nr
		}
		return a.cas < b.cas
	})
	for _, k := range keys {
		gr, gok := gn[k]
		lr, lok := ln[k]
		name := gr.Syscall
		if !gok {
			name = lr.Syscall
		}
		where := fmt.Sprintf("%s %s (nr %d)", k.arch, name, k.nr)
		if k.cas != "" {
			where += " if " + k.cas
		}
		switch {
		case !gok:
			diffs = append(diffs, fmt.Sprintf("%s: only in the loaded filter: %s", where, lr.Action))
		case !lok:
			diffs = append(diffs, fmt.Sprintf("%s: missing from the loaded filter (golden: %s)", where, gr.Action))
		case inTail(k):
			if lr.Action != enosysAction {
				diffs = append(diffs, fmt.Sprintf("%s: inside runc's ENOSYS tail but loaded answers %s", where, lr.Action))
			} else if gr.Action != golden.Default && gr.Action != enosysAction {
				diffs = append(diffs, fmt.Sprintf("%s: golden %s is shadowed by runc's ENOSYS tail", where, gr.Action))
			}
		case gr.Action != lr.Action:
			diffs = append(diffs, fmt.Sprintf("%s: golden %s, loaded %s", where, gr.Action, lr.Action))
		}
	}
	archs := map[string]bool{}
	for a := range gc {
		archs[a] = true
	}
	for a := range lc {
		archs[a] = true
	}
	names := make([]string, 0, len(archs))
	for a := range archs {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		g, gok := gc[a]
		l, lok := lc[a]
		switch {
		case !gok || !lok:
			diffs = append(diffs, fmt.Sprintf("%s compat ABI: present in only one table", a))
		case g.Action != l.Action:
			diffs = append(diffs, fmt.Sprintf("%s compat ABI: golden %s, loaded %s", a, g.Action, l.Action))
		}
	}
	return diffs
}
