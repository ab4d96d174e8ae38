package policy

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Table is a decision table: what a filter does for each arch, syscall and argument case.
type Table struct {
	Rows []Row
	// Default is the action for syscall numbers no rule names. Table sets it
	// from the policy; DecodeFilter measures it (the most common action).
	Default string
	// ENOSYSFrom is, per arch, the first syscall number runc's patchbpf
	// answers with ENOSYS when it loads this policy: one above the highest
	// number the policy names. Policy.Table sets it; decoded tables leave it
	// empty and CompareLoaded infers the tail.
	ENOSYSFrom map[string]uint32
}

// Row is one line of a decision table.
type Row struct {
	Arch    string
	Syscall string
	Case    string // argument condition, "" for any
	Action  string // allow, kill, errno NAME, ...
	// Nr and Last are the syscall numbers the row covers. A named syscall
	// has Nr == Last; unassigned numbers are grouped ("#335-#386"). The
	// row for the arch's 32-bit compat ABI ("*") has neither.
	Nr, Last uint32
	// Reason is the reason of the policy rule that decides the row (the
	// default's reason where no rule does). Policy.Table sets it; tables
	// decoded from a loaded filter leave it empty. Diff prints it.
	Reason string
}

// String renders the row as one table line.
func (r Row) String() string {
	s := fmt.Sprintf("%-8s %-24s %s", r.Arch, r.Syscall, r.Action) + r.caseSuffix()
	return strings.TrimRight(s, " ")
}

// caseSuffix renders the row's case the way every table line, diff line and
// contrast puts it after the action: nothing, " otherwise" or " if <case>".
func (r Row) caseSuffix() string {
	switch r.Case {
	case "":
		return ""
	case otherwiseCase:
		return " " + otherwiseCase
	}
	return " if " + r.Case
}

// compatSyscall marks the row for a foreign ABI on the same CPU.
const compatSyscall = "*"

// Table computes the decision table for arch from the BPF that the policy compiles to.
func (p *Policy) Table(arch string) (Table, error) {
	prog, err := p.BPF(arch)
	if err != nil {
		return Table{}, err
	}
	t, witness, err := decodeFilter(arch, prog)
	if err != nil {
		return Table{}, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	measured := t.Default
	t.Default = tableAction(p.DefaultAction)
	if measured != t.Default && !p.imported {
		return Table{}, fmt.Errorf("policy %s (%s): filter's most common action is %q, the header says %q", p.Name, arch, measured, t.Default)
	}
	if a, err := lookupArch(arch); err == nil {
		for i := range t.Rows {
			t.Rows[i].Reason = p.reasonFor(a, t.Rows[i], witness[rowKey(t.Rows[i])])
		}
	}
	if from, ok := p.enosysFrom(arch); ok {
		canon, err := CanonicalArch(arch)
		if err != nil {
			return Table{}, err
		}
		t.ENOSYSFrom = map[string]uint32{canon: from}
	}
	return t, nil
}

// enosysFrom is where runc's patchbpf starts answering ENOSYS for arch: one
// above the highest syscall number the configuration names (including rules
// that repeat the default). There is no stub when the default already is
// ENOSYS.
func (p *Policy) enosysFrom(arch string) (uint32, bool) {
	a, err := lookupArch(arch)
	if err != nil {
		return 0, false
	}
	if p.DefaultAction.Kind == ActAllow || p.DefaultAction.Kind == ActErrno && p.DefaultAction.Errno == unix.ENOSYS {
		return 0, false
	}
	highest, any := 0, false
	for _, c := range p.calls(a) {
		if nr, ok := syscallNumber(c.rule.Syscall, a); ok && nr >= highest {
			highest, any = nr, true
		}
	}
	if !any {
		return 0, false
	}
	return uint32(highest) + 1, true
}

// reasonFor names why the policy gives row its action: the reason of the
// rule whose conditions the row's witness arguments meet and whose action is
// the row's, else the default's reason when the row has the default action.
// Rows that no rule explains (the compat ABI's bad-architecture kill) get "".
func (p *Policy) reasonFor(a archInfo, row Row, args [6]uint64) string {
	if row.Syscall == compatSyscall {
		return ""
	}
	for _, r := range p.Rules {
		if r.Syscall != row.Syscall || tableAction(r.Action) != row.Action {
			continue
		}
		if _, ok := syscallNumber(r.Syscall, a); ok && r.matches(args) {
			return r.Reason
		}
	}
	if row.Action == tableAction(p.DefaultAction) {
		return p.DefaultReason
	}
	return ""
}

// matches reports whether args meet every condition of r, compared as
// libseccomp compares them on a 64-bit architecture.
func (r Rule) matches(args [6]uint64) bool {
	for _, c := range r.Conds {
		v := args[c.Arg]
		if c.HasMask {
			v &= c.Mask
		}
		any := false
		for _, w := range c.Values {
			switch c.Op {
			case OpEq:
				any = any || v == w
			case OpNe:
				any = any || v != w
			case OpLt:
				any = any || v < w
			case OpLe:
				any = any || v <= w
			case OpGt:
				any = any || v > w
			case OpGe:
				any = any || v >= w
			}
		}
		if !any {
			return false
		}
	}
	return true
}

// tableAction spells a policy action the way tables do.
func tableAction(a Action) string {
	switch a.Kind {
	case ActAllow:
		return "allow"
	case ActErrno:
		return "errno " + errnoName(a.Errno)
	}
	return "kill"
}

// DecodeFilter computes the decision table of a loaded classic-BPF filter.
// It evaluates the program for every syscall number below 1024 (and around
// larger numbers the program tests), exploring every argument path, and for
// the arch's 32-bit compat ABI.
func DecodeFilter(arch string, prog []unix.SockFilter) (Table, error) {
	t, _, err := decodeFilter(arch, prog)
	return t, err
}

// decodeFilter is DecodeFilter that also returns, for each named syscall's
// row (by rowKey), arguments that take the row's path.
func decodeFilter(arch string, prog []unix.SockFilter) (Table, map[string][6]uint64, error) {
	a, err := lookupArch(arch)
	if err != nil {
		return Table{}, nil, err
	}
	if err := validate(prog); err != nil {
		return Table{}, nil, fmt.Errorf("decode filter: %w", err)
	}
	witness := map[string][6]uint64{}
	var rows []Row
	counts := map[string]int{}
	var pending *Row // coalesces consecutive unassigned numbers
	pendingSig := ""
	flush := func() {
		if pending != nil {
			rows = append(rows, *pending)
			pending = nil
		}
	}
	for _, nr := range nrProbes(prog) {
		name, named := syscallName(int(nr), a)
		if a.x32Bit != 0 && nr&a.x32Bit != 0 {
			named = false
		}
		label := func(word int, v uint32) string {
			if !named || word < 4 || word%2 != 0 {
				return ""
			}
			return labelValue(name, uint(word-4)/2, uint64(v))
		}
		outs, complete := explore(prog, a.audit, nr, label)
		if !complete {
			return Table{}, nil, fmt.Errorf("decode filter: syscall %d: more than %d argument paths, or arguments used in arithmetic, scratch memory or returns; the table would be partial", nr, maxRunsPerSyscall)
		}
		if named {
			flush()
			for _, o := range collapse(outs) {
				r := Row{Arch: a.name, Syscall: name, Case: o.cond, Action: o.action, Nr: nr, Last: nr}
				witness[rowKey(r)] = o.args
				rows = append(rows, r)
				counts[o.action]++
			}
			continue
		}
		cs := collapse(outs)
		sig := fmt.Sprint(cs)
		if pending != nil && sig == pendingSig && nr == pending.Last+1 && nr < probeLimit {
			pending.Last = nr
			pending.Syscall = fmt.Sprintf("#%d-#%d", pending.Nr, nr)
			continue
		}
		flush()
		for _, o := range cs {
			r := Row{Arch: a.name, Syscall: numberName(nr), Case: o.cond, Action: o.action, Nr: nr, Last: nr}
			if len(cs) == 1 && nr < probeLimit {
				pending, pendingSig = &r, sig
				continue
			}
			rows = append(rows, r)
		}
	}
	flush()
	d := data{1: a.compatAudit}
	ret, _, _ := run(prog, &d)
	rows = append(rows, Row{Arch: a.compatName, Syscall: compatSyscall, Action: ActionString(ret)})
	sortRows(rows)
	return Table{Rows: rows, Default: mostCommon(counts)}, witness, nil
}

func numberName(nr uint32) string {
	if nr < probeLimit {
		return fmt.Sprintf("#%d", nr)
	}
	return fmt.Sprintf("#%#x", nr)
}

// collapse reduces a syscall's paths to one unconditional row when every
// path ends in the same action, and otherwise sorts and de-duplicates them.
func collapse(outs []outcome) []outcome {
	same := true
	for _, o := range outs[1:] {
		if o.action != outs[0].action {
			same = false
		}
	}
	if same {
		return []outcome{{action: outs[0].action, args: outs[0].args}}
	}
	seen := map[outcome]bool{}
	var res []outcome
	for _, o := range outs {
		if o.otherwise {
			o.cond = otherwiseCase
		}
		o.otherwise = false
		key := o
		key.args = [6]uint64{}
		if !seen[key] {
			seen[key] = true
			res = append(res, o)
		}
	}
	sort.Slice(res, func(i, j int) bool {
		a, b := res[i], res[j]
		if (a.cond == otherwiseCase) != (b.cond == otherwiseCase) {
			return b.cond == otherwiseCase
		}
		if a.cond != b.cond {
			return a.cond < b.cond
		}
		return a.action < b.action
	})
	return res
}

// otherwiseCase labels the path that excluded every value the syscall's
// other rows name.
const otherwiseCase = "otherwise"

func mostCommon(counts map[string]int) string {
	best, n := "", -1
	for a, c := range counts {
		if c > n || c == n && a < best {
			best, n = a, c
		}
	}
	return best
}

// rowKind orders named syscalls first, then number ranges, then the compat row.
func rowKind(r Row) int {
	switch {
	case r.Syscall == compatSyscall:
		return 2
	case strings.HasPrefix(r.Syscall, "#"):
		return 1
	}
	return 0
}

func sortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Arch != b.Arch {
			// The compat row follows its native arch's rows.
			return a.Arch < b.Arch
		}
		if ka, kb := rowKind(a), rowKind(b); ka != kb {
			return ka < kb
		}
		if rowKind(a) == 1 && a.Nr != b.Nr {
			return a.Nr < b.Nr
		}
		if a.Syscall != b.Syscall {
			return a.Syscall < b.Syscall
		}
		if a.Case != b.Case {
			if (a.Case == otherwiseCase) != (b.Case == otherwiseCase) {
				return b.Case == otherwiseCase
			}
			return a.Case < b.Case
		}
		return a.Action < b.Action
	})
}

// Merge concatenates tables (for several arches) into one sorted table.
func Merge(ts ...Table) Table {
	var out Table
	for _, t := range ts {
		out.Rows = append(out.Rows, t.Rows...)
		if out.Default == "" {
			out.Default = t.Default
		}
		for a, n := range t.ENOSYSFrom {
			if out.ENOSYSFrom == nil {
				out.ENOSYSFrom = map[string]uint32{}
			}
			out.ENOSYSFrom[a] = n
		}
	}
	sortRows(out.Rows)
	return out
}

// WriteTo writes the table, one row per line, under a header comment.
func (t Table) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	b.WriteString("# arch    syscall                  action [if argument case]\n")
	fmt.Fprintf(&b, "# default: %s\n", t.Default)
	archs := make([]string, 0, len(t.ENOSYSFrom))
	for a := range t.ENOSYSFrom {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	for _, a := range archs {
		note := ""
		if info, err := lookupArch(a); err == nil && info.x32Bit != 0 {
			note = " (without the x32 bit)"
		}
		fmt.Fprintf(&b, "# runc adds: %s syscall numbers >= %d%s answer errno ENOSYS\n", a, t.ENOSYSFrom[a], note)
	}
	for _, r := range t.Rows {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// String renders the table as WriteTo does.
func (t Table) String() string {
	var b strings.Builder
	_, _ = t.WriteTo(&b)
	return b.String()
}

// rowKey identifies a row for diffs: arch, syscall and case.
func rowKey(r Row) string { return r.Arch + "\x00" + r.Syscall + "\x00" + r.Case }

// Diff lists the semantic differences between two tables, one per line:
// "- kill statx (x86_64) : REASON" then "+ allow statx (x86_64) : REASON"
// when an action changed, a lone "+" or "-" when a row appears or
// disappears. Each line carries its own table's reason for the row, when
// the table has one (tables from Policy.Table do).
func Diff(old, new Table) []string {
	om, nm := map[string]Row{}, map[string]Row{}
	var keys []Row
	for _, r := range old.Rows {
		om[rowKey(r)] = r
		keys = append(keys, r)
	}
	for _, r := range new.Rows {
		nm[rowKey(r)] = r
		if _, ok := om[rowKey(r)]; !ok {
			keys = append(keys, r)
		}
	}
	sortRows(keys)
	var out []string
	for _, k := range keys {
		o, inOld := om[rowKey(k)]
		n, inNew := nm[rowKey(k)]
		switch {
		case inOld && inNew && o.Action == n.Action:
		case inOld && inNew:
			out = append(out, diffLine("-", o), diffLine("+", n))
		case inOld:
			out = append(out, diffLine("-", o))
		default:
			out = append(out, diffLine("+", n))
		}
	}
	return out
}

func diffLine(sign string, r Row) string {
	s := fmt.Sprintf("%s %s %s", sign, r.Action, r.Syscall) + r.caseSuffix()
	s += " (" + r.Arch + ")"
	if r.Reason != "" {
		s += " : " + r.Reason
	}
	return s
}
