package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Verdict is what a table does with one named system call as a whole.
type Verdict string

// Verdicts: every argument case allowed, none allowed, or some.
const (
	VerdictAllow       Verdict = "allow"
	VerdictDeny        Verdict = "deny"
	VerdictConditional Verdict = "conditional"
)

// Contrast is one system call two tables judge differently (or both allow
// only under conditions, which a reviewer must compare by hand).
type Contrast struct {
	Arch, Syscall string
	A, B          Verdict
	// ACases and BCases are the rows' "action [if case]", for the report.
	ACases, BCases []string
}

// String renders "x86_64 clone: A conditional (...), B conditional (...)".
func (c Contrast) String() string {
	return fmt.Sprintf("%s %s: %s [%s] vs %s [%s]", c.Arch, c.Syscall, c.A, strings.Join(c.ACases, "; "), c.B, strings.Join(c.BCases, "; "))
}

// verdicts folds a table's named rows per arch and syscall.
func verdicts(t Table) (map[string]Verdict, map[string][]string) {
	allow, deny := map[string]bool{}, map[string]bool{}
	cases := map[string][]string{}
	for _, r := range t.Rows {
		if r.Syscall == compatSyscall || strings.HasPrefix(r.Syscall, "#") {
			continue
		}
		k := r.Arch + " " + r.Syscall
		if r.Action == "allow" {
			allow[k] = true
		} else {
			deny[k] = true
		}
		cases[k] = append(cases[k], r.Action+r.caseSuffix())
	}
	out := map[string]Verdict{}
	for k := range cases {
		switch {
		case allow[k] && deny[k]:
			out[k] = VerdictConditional
		case allow[k]:
			out[k] = VerdictAllow
		default:
			out[k] = VerdictDeny
		}
	}
	return out, cases
}

// Contrasts compares two decision tables by verdict: each system call that
// one allows (wholly or in part) where the other's verdict differs, and each
// that both allow only conditionally. Different denials (kill against
// errno) are not contrasts; Diff lists them.
func Contrasts(a, b Table) []Contrast {
	va, ca := verdicts(a)
	vb, cb := verdicts(b)
	keys := map[string]bool{}
	for k := range va {
		keys[k] = true
	}
	for k := range vb {
		keys[k] = true
	}
	var out []Contrast
	for k := range keys {
		x, y := va[k], vb[k]
		if x == "" {
			x = VerdictDeny
		}
		if y == "" {
			y = VerdictDeny
		}
		if x == y && x != VerdictConditional {
			continue
		}
		arch, name, _ := strings.Cut(k, " ")
		out = append(out, Contrast{Arch: arch, Syscall: name, A: x, B: y, ACases: ca[k], BCases: cb[k]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Arch != out[j].Arch {
			return out[i].Arch < out[j].Arch
		}
		return out[i].Syscall < out[j].Syscall
	})
	return out
}

// Permits reports whether verdict v allows at least some calls.
func (v Verdict) Permits() bool { return v == VerdictAllow || v == VerdictConditional }
