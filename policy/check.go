package policy

import (
	"sort"

	"golang.org/x/sys/unix"
)

// neverAllowed are system calls no policy may allow, whatever its reasons:
// namespaces and mounts, cross-process access, kernel exploit surface,
// kernel loading, handle-based escapes, and clone3 (whose flags live in
// memory where seccomp cannot read them).
var neverAllowed = map[string]string{
	"unshare": "namespaces", "setns": "namespaces", "mount": "mounts", "umount": "mounts",
	"umount2": "mounts", "pivot_root": "mounts", "chroot": "mounts", "move_mount": "mounts",
	"open_tree": "mounts", "fsopen": "mounts", "fsconfig": "mounts", "fsmount": "mounts",
	"fspick": "mounts", "mount_setattr": "mounts", "ptrace": "other processes",
	"process_vm_readv": "other processes", "process_vm_writev": "other processes",
	"pidfd_getfd": "other processes", "bpf": "kernel attack surface",
	"keyctl": "kernel keyrings", "add_key": "kernel keyrings", "request_key": "kernel keyrings",
	"userfaultfd": "exploit primitive", "perf_event_open": "kernel attack surface",
	"io_uring_setup": "io_uring bypasses seccomp", "io_uring_enter": "io_uring bypasses seccomp",
	"io_uring_register": "io_uring bypasses seccomp", "kexec_load": "kernel loading",
	"kexec_file_load": "kernel loading", "init_module": "kernel modules",
	"finit_module": "kernel modules", "delete_module": "kernel modules",
	"open_by_handle_at": "handle-based escape", "clone3": "arguments cannot be filtered",
}

// namespaceFlags are every CLONE_NEW* bit clone(2) accepts.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// checkRules enforces what must hold for any policy: no duplicate or
// ambiguous rules, nothing from neverAllowed allowed, sockets only AF_UNIX
// (only TCP over IPv4 in an enclave-loop policy, scope.go), clone only for
// threads.
func (ps *parser) checkRules() {
	type seen struct{ uncond, cond int }
	bySyscall := map[string]*seen{}
	exact := map[string]int{}
	for _, r := range ps.p.Rules {
		ps.line = r.Line
		key := r.Syscall + " " + r.Condition()
		if prev, ok := exact[key]; ok {
			ps.errorf(r.Col, "duplicate rule for %s (first on line %d)", describe(r), prev)
			continue
		}
		exact[key] = r.Line
		s := bySyscall[r.Syscall]
		if s == nil {
			s = &seen{}
			bySyscall[r.Syscall] = s
		}
		if len(r.Conds) == 0 {
			s.uncond = r.Line
		} else if s.cond == 0 {
			s.cond = r.Line
		}
		if s.uncond != 0 && s.cond != 0 {
			ps.errorf(r.Col, "%s has both an unconditional rule (line %d) and conditional rules (line %d); an unconditional rule would override them", r.Syscall, s.uncond, s.cond)
		}
		if r.Action.Kind == ActAllow {
			ps.checkAllow(r)
		}
	}
	ps.checkOverlaps()
}

func describe(r Rule) string {
	if c := r.Condition(); c != "" {
		return r.Syscall + " if " + c
	}
	return r.Syscall
}

// checkAllow applies the per-syscall invariants to one allow rule.
func (ps *parser) checkAllow(r Rule) {
	if why, ok := neverAllowed[r.Syscall]; ok {
		ps.errorf(r.Col, "%s may never be allowed (%s)", r.Syscall, why)
		return
	}
	if ps.p.Scope == ScopeEnclaveLoop && ps.checkEnclaveLoopAllow(r) {
		return
	}
	switch r.Syscall {
	case "socket", "socketpair":
		c, ok := condOn(r, 0)
		if !ok || c.Op != OpEq || len(c.Values) != 1 || c.Values[0] != unix.AF_UNIX ||
			(c.HasMask && c.Mask&0xffffffff != 0xffffffff) {
			ps.errorf(r.Col, "%s may only be allowed with arg0 == AF_UNIX (a mask must keep all 32 low bits)", r.Syscall)
		}
	case "clone":
		c, ok := condOn(r, 0)
		need := uint64(namespaceFlags | unix.CLONE_THREAD)
		if !ok || !c.HasMask || c.Op != OpEq || c.Mask&need != need {
			ps.errorf(r.Col, "clone may only be allowed with arg0 & MASK == VALUE where MASK covers CLONE_THREAD and every CLONE_NEW* flag")
			return
		}
		for _, v := range c.Values {
			if v&unix.CLONE_THREAD == 0 || v&namespaceFlags != 0 {
				ps.errorf(r.Col, "clone may only be allowed with CLONE_THREAD set and every CLONE_NEW* flag clear (value %#x)", v)
			}
		}
	}
}

// checkOverlaps rejects two conditional rules on one syscall with different
// actions whose value sets overlap on the same argument (libseccomp would
// resolve them by its own precedence, which a reviewer cannot see).
func (ps *parser) checkOverlaps() {
	bySyscall := map[string][]Rule{}
	for _, r := range ps.p.Rules {
		if len(r.Conds) > 0 {
			bySyscall[r.Syscall] = append(bySyscall[r.Syscall], r)
		}
	}
	names := make([]string, 0, len(bySyscall))
	for n := range bySyscall {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rules := bySyscall[n]
		for i := range rules {
			for j := i + 1; j < len(rules); j++ {
				a, b := rules[i], rules[j]
				if a.Action == b.Action {
					continue
				}
				if len(a.Conds) == 1 && len(b.Conds) == 1 && !sameShape(a.Conds[0], b.Conds[0]) && unmaskedOnSameArg(a.Conds[0], b.Conds[0]) {
					if lo, hi, ok := firstOverlap(condIntervals(a.Conds[0]), condIntervals(b.Conds[0])); ok {
						ps.line = b.Line
						ps.errorf(b.Col, "%s values %#x..%#x of arg%d have two actions (lines %d and %d)", n, lo, hi, a.Conds[0].Arg, a.Line, b.Line)
					}
					continue
				}
				if len(a.Conds) != 1 || len(b.Conds) != 1 || !sameShape(a.Conds[0], b.Conds[0]) {
					if disjointOnSomeArg(a, b) {
						continue
					}
					ps.line = b.Line
					ps.errorf(b.Col, "%s has rules with different actions whose conditions are not simple equalities on one argument under one mask, nor unmasked comparisons of one argument, nor kept apart by an argument both compare (line %d); reviewers could not tell which wins", n, a.Line)
					continue
				}
				for _, va := range a.Conds[0].Values {
					for _, vb := range b.Conds[0].Values {
						if va == vb {
							ps.line = b.Line
							ps.errorf(b.Col, "%s value %#x has two actions (lines %d and %d)", n, va, a.Line, b.Line)
						}
					}
				}
			}
		}
	}
}

// unmaskedOnSameArg reports whether a and b compare the same argument, whole
// (no mask). Their value sets are then ranges of one 64-bit number, which
// checkOverlaps can intersect exactly: "allow if arg5 == 0" next to "errno
// EPERM if arg5 != 0", or a list of values next to "arg2 > N".
func unmaskedOnSameArg(a, b Cond) bool {
	return a.Arg == b.Arg && !a.HasMask && !b.HasMask
}

// interval is the closed range lo..hi of argument values.
type interval struct{ lo, hi uint64 }

// condIntervals is the set of 64-bit values an unmasked condition matches,
// as libseccomp compares them on a 64-bit architecture.
func condIntervals(c Cond) []interval {
	const top = ^uint64(0)
	var out []interval
	for _, v := range c.Values {
		switch c.Op {
		case OpEq:
			out = append(out, interval{v, v})
		case OpNe:
			if v > 0 {
				out = append(out, interval{0, v - 1})
			}
			if v < top {
				out = append(out, interval{v + 1, top})
			}
		case OpLt:
			if v > 0 {
				out = append(out, interval{0, v - 1})
			}
		case OpLe:
			out = append(out, interval{0, v})
		case OpGt:
			if v < top {
				out = append(out, interval{v + 1, top})
			}
		case OpGe:
			out = append(out, interval{v, top})
		}
	}
	return out
}

// firstOverlap returns the lowest range two interval sets share.
func firstOverlap(a, b []interval) (lo, hi uint64, ok bool) {
	for _, x := range a {
		for _, y := range b {
			l, h := max(x.lo, y.lo), min(x.hi, y.hi)
			if l <= h && (!ok || l < lo) {
				lo, hi, ok = l, h, true
			}
		}
	}
	return lo, hi, ok
}

func sameShape(a, b Cond) bool {
	return a.Arg == b.Arg && a.Op == OpEq && b.Op == OpEq && a.HasMask == b.HasMask && a.Mask == b.Mask
}

func condOn(r Rule, arg uint) (Cond, bool) {
	for _, c := range r.Conds {
		if c.Arg == arg {
			return c, true
		}
	}
	return Cond{}, false
}
