package verify

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/policy"
)

// filterRead is what the loaded-filter probe learned in OnStart.
type filterRead struct {
	progs [][]unix.SockFilter
	err   error
	done  bool
}

// compareFilter turns a read filter into the filter/loaded result.
func compareFilter(fr filterRead, pol *policy.Policy, arch string) (Result, policy.Table, bool) {
	r := Result{ID: "filter/loaded", Group: "filter"}
	fail := func(format string, args ...any) (Result, policy.Table, bool) {
		r.Status, r.Evidence = Fail, fmt.Sprintf(format, args...)
		return r, policy.Table{}, false
	}
	switch {
	case !fr.done:
		return fail("the runtime never reported the job's host pid, so its filter could not be read")
	case fr.err != nil:
		return fail("could not read the loaded filter: %v", fr.err)
	case len(fr.progs) == 0:
		return fail("no seccomp filter is loaded in the sandboxed process")
	case len(fr.progs) > 1:
		return fail("%d filters are stacked on the sandboxed process; the policy compiles to exactly one", len(fr.progs))
	}
	prog := fr.progs[0]
	loaded, err := policy.DecodeFilter(arch, prog)
	if err != nil {
		return fail("cannot decode the loaded filter (%d instructions): %v", len(prog), err)
	}
	golden, err := pol.Table(arch)
	if err != nil {
		return fail("cannot compute the golden table of policy %s: %v", pol.Name, err)
	}
	diffs := policy.CompareLoaded(golden, loaded)
	if len(diffs) > 0 {
		return fail("the loaded filter (%d instructions, %s) differs from the golden table of policy %s in %d places: %s",
			len(prog), policy.ProgramSHA256(prog), pol.Name, len(diffs), strings.Join(diffs, "; "))
	}
	r.Status = Pass
	r.Evidence = fmt.Sprintf("the loaded filter (%d instructions, %s) matches the golden table of policy %s (%s, %d rows; runc's ENOSYS tail accounted for)",
		len(prog), policy.ProgramSHA256(prog), pol.Name, arch, len(golden.Rows))
	return r, loaded, true
}

// denylist are system calls that must never be allowed, whatever the
// policy says: the deny list of the sandbox design, reviewed with reasons in
// the policy file.
var denylist = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "pidfd_open",
	"pidfd_send_signal", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "unshare", "setns", "bpf",
	"perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module",
	"finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog",
	"settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "iopl", "ioperm", "modify_ldt",
	"personality", "memfd_create", "memfd_secret", "execveat", "open_by_handle_at",
	"name_to_handle_at", "mknod", "mknodat", "setuid", "setgid", "setreuid", "setregid",
	"setresuid", "setresgid", "capset", "seccomp", "splice", "vmsplice", "tee", "kill", "tkill",
	"fork", "vfork",
}

// checkDenylist fails when the table allows any denylisted call in any case.
func checkDenylist(t policy.Table, which string) Result {
	r := Result{ID: "filter/denylist", Group: "filter"}
	deny := setOf(denylist)
	var allowed []string
	seen := map[string]bool{}
	for _, row := range t.Rows {
		if deny[row.Syscall] && row.Action == "allow" {
			allowed = append(allowed, strings.TrimSpace(row.String()))
		}
		seen[row.Syscall] = true
	}
	if len(allowed) > 0 {
		r.Status = Fail
		r.Evidence = fmt.Sprintf("the %s table allows denylisted calls: %s", which, strings.Join(allowed, "; "))
		return r
	}
	r.Status = Pass
	r.Evidence = fmt.Sprintf("none of %d denylisted calls is allowed by the %s table (default %s)", len(denylist), which, t.Default)
	return r
}
