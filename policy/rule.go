package policy

import (
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ActionKind is what a rule does with a matching system call.
type ActionKind int

// Action kinds a policy file can name.
const (
	// ActAllow lets the call run.
	ActAllow ActionKind = iota + 1
	// ActKill kills the whole process (SECCOMP_RET_KILL_PROCESS).
	ActKill
	// ActErrno fails the call with an errno and does not run it.
	ActErrno
)

// Action is a rule's (or the default) action.
type Action struct {
	Kind  ActionKind
	Errno syscall.Errno // for ActErrno
}

// String renders the action as a policy file spells it: allow, kill, errno NAME.
func (a Action) String() string {
	switch a.Kind {
	case ActAllow:
		return "allow"
	case ActKill:
		return "kill"
	case ActErrno:
		return "errno " + errnoName(a.Errno)
	}
	return "invalid"
}

// Op is an argument comparison.
type Op int

// Comparison operators. With a mask only OpEq is allowed (libseccomp's
// SCMP_CMP_MASKED_EQ).
const (
	OpEq Op = iota + 1
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
)

var opText = map[Op]string{OpEq: "==", OpNe: "!=", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">="}

// String returns the operator's symbol.
func (o Op) String() string { return opText[o] }

// Cond is one argument condition: arg<Arg> [& Mask] Op Value. With several
// Values (the "in {...}" form) the rule matches when any of them does.
type Cond struct {
	Arg     uint
	HasMask bool
	Mask    uint64
	Op      Op
	Values  []uint64
	// Names are the symbolic spellings of Values, "" where a number was written.
	Names []string
}

// String renders the condition in policy syntax with symbolic names.
func (c Cond) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "arg%d ", c.Arg)
	if c.HasMask {
		fmt.Fprintf(&b, "& %#x ", c.Mask)
	}
	vals := make([]string, len(c.Values))
	for i, v := range c.Values {
		if i < len(c.Names) && c.Names[i] != "" {
			vals[i] = c.Names[i]
		} else {
			vals[i] = fmt.Sprintf("%#x", v)
		}
	}
	if len(c.Values) > 1 {
		fmt.Fprintf(&b, "in {%s}", strings.Join(vals, ", "))
	} else {
		fmt.Fprintf(&b, "%s %s", c.Op, vals[0])
	}
	return b.String()
}

// Rule is one line of a policy: an action for one system call, optionally
// only when its arguments match.
type Rule struct {
	Line      int
	Col       int // column of the syscall name
	Group     string
	Action    Action
	Syscall   string
	Conds     []Cond
	Sensitive bool
	Reason    string
}

// String renders the rule in canonical policy syntax.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Action, r.Syscall)
	for i, c := range r.Conds {
		if i == 0 {
			b.WriteString(" if ")
		} else {
			b.WriteString(" && ")
		}
		b.WriteString(c.String())
	}
	if r.Sensitive {
		b.WriteString(" +sensitive")
	}
	fmt.Fprintf(&b, " : %s", r.Reason)
	return b.String()
}

// Condition renders just the rule's argument condition ("" when unconditional).
func (r Rule) Condition() string {
	parts := make([]string, len(r.Conds))
	for i, c := range r.Conds {
		parts[i] = c.String()
	}
	return strings.Join(parts, " && ")
}

// errnoName names an errno (EPERM) or falls back to its number.
func errnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("%d", int(e))
}

// errnoByName resolves an errno name such as EPERM.
func errnoByName(name string) (syscall.Errno, bool) {
	for e := syscall.Errno(1); e < 4096; e++ {
		if unix.ErrnoName(e) == name {
			return e, true
		}
	}
	return 0, false
}
