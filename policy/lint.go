package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Severity of a lint finding.
type Severity string

// Lint severities: errors fail "awf policy lint", warnings do not.
const (
	SevError   Severity = "error"
	SevWarning Severity = "warning"
)

// Finding is one lint result.
type Finding struct {
	File     string
	Line     int
	Col      int
	Severity Severity
	Msg      string
}

// String renders file:line:col: severity: message.
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", f.File, f.Line, f.Col, f.Severity, f.Msg)
}

// sensitive are system calls that widen the sandbox's reach even when a job
// needs them. An allow rule for one must carry +sensitive (a reviewer signed
// off on it); those in mustCondition must also restrict their arguments.
var sensitive = map[string]string{
	"execve": "runs new programs", "execveat": "runs programs from descriptors",
	"mmap": "can map executable memory", "mprotect": "can make memory executable",
	"pkey_mprotect": "can make memory executable", "clone": "creates threads or processes",
	"ioctl": "reaches every device driver", "socket": "reaches network stacks",
	"socketpair": "creates sockets", "prctl": "changes process attributes",
	"personality": "changes execution domains", "fcntl": "takes locks and leases",
	"kill": "signals other processes", "tkill": "signals other threads",
	"memfd_create": "anonymous executable files", "setuid": "changes identity",
	"setgid": "changes identity", "setresuid": "changes identity", "setresgid": "changes identity",
	"capset": "changes capabilities", "fork": "creates processes", "vfork": "creates processes",
	"chown": "changes ownership", "fchown": "changes ownership", "lchown": "changes ownership",
	"fchownat": "changes ownership", "mknod": "creates devices", "mknodat": "creates devices",
	"seccomp": "changes filters", "inotify_init1": "watches shared files",
	"splice": "pipe page tricks", "vmsplice": "pipe page tricks",
}

// mustCondition are sensitive calls that may only be allowed with an argument condition.
var mustCondition = map[string]bool{"clone": true, "ioctl": true, "socket": true, "socketpair": true, "prctl": true, "fcntl": true}

// Lint checks a policy file: parse errors (syntax, unknown names and
// constants, missing reasons, duplicates, forbidden allows), then review
// rules: sensitive allows need +sensitive, some need conditions, and
// reasons must say something.
func Lint(name string, src []byte) []Finding {
	p, errs := parse(name, src)
	out := make([]Finding, 0, len(errs))
	for _, e := range errs {
		out = append(out, Finding{File: e.File, Line: e.Line, Col: e.Col, Severity: SevError, Msg: e.Msg})
	}
	add := func(r Rule, sev Severity, format string, args ...any) {
		out = append(out, Finding{File: name, Line: r.Line, Col: r.Col, Severity: sev, Msg: fmt.Sprintf(format, args...)})
	}
	if strings.HasPrefix(p.DefaultReason, ReasonNeeded) {
		out = append(out, Finding{File: name, Line: p.defaultLine, Col: 1, Severity: SevError, Msg: "reason needed: the imported default action has no reviewed reason"})
	}
	for _, r := range p.Rules {
		if strings.HasPrefix(strings.TrimSpace(r.Reason), ReasonNeeded) {
			add(r, SevError, "reason needed: imported rule %s has no reviewed reason", describe(r))
		}
		if r.Action.Kind == ActAllow {
			for _, w := range dangerousAllow(r) {
				add(r, SevWarning, "%s", w)
			}
		}
		if len(strings.TrimSpace(r.Reason)) < 4 || strings.EqualFold(strings.TrimSpace(r.Reason), r.Syscall) {
			add(r, SevError, "reason for %s does not explain anything: %q", r.Syscall, r.Reason)
		}
		why, isSensitive := sensitive[r.Syscall]
		if r.Action.Kind != ActAllow {
			if r.Sensitive {
				add(r, SevWarning, "+sensitive on a rule that does not allow %s", r.Syscall)
			}
			continue
		}
		if isSensitive && !r.Sensitive && !(r.Syscall == "fcntl" && len(r.Conds) > 0) {
			add(r, SevError, "dangerous allow: %s %s; mark the rule +sensitive once reviewed", r.Syscall, why)
		}
		if mustCondition[r.Syscall] && len(r.Conds) == 0 {
			add(r, SevError, "dangerous allow: %s must be restricted by an argument condition", r.Syscall)
		}
		if r.Sensitive && !isSensitive {
			add(r, SevWarning, "+sensitive on %s, which is not on the sensitive list", r.Syscall)
		}
	}
	for _, a := range p.Arches {
		info, _ := lookupArch(a)
		if len(errs) == 0 && len(p.calls(info)) == 0 {
			out = append(out, Finding{File: name, Line: 1, Col: 1, Severity: SevError, Msg: "no rule applies on " + a})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Col < out[j].Col
	})
	return out
}

// HasErrors reports whether any finding is an error.
func HasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == SevError {
			return true
		}
	}
	return false
}
