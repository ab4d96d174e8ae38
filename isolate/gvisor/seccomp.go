package gvisor

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// This runsc build (2022-12) applies OCI seccomp inside the Sentry with a
// reduced action set: KILL (one thread), TRAP, ERRNO (always EPERM), TRACE
// and ALLOW. translateSeccomp maps the compiled policy onto it and lists
// every place where the result differs from what the kernel filter of the
// direct backend does. The differences are reported, never hidden.
//
// A policy's kill (SCMP_ACT_KILL_PROCESS) becomes TRAP, not KILL. KILL ends
// only the calling thread: in a multi-threaded job the other threads run on
// until the wall-clock limit, and the outcome is a timeout. TRAP skips the
// call and sends the calling thread SIGSYS, whose default action ends the
// whole thread group at once with that signal; runsc then exits 128+SIGSYS,
// which is the seccomp-kill outcome, as on direct. What TRAP cannot do is
// stop a job that handles, ignores or blocks SIGSYS: the call is still not
// executed (it returns its own number), but the job carries on. A Go
// program (the enclave loop) handles SIGSYS itself and exits 2. Both are
// declared deviations; neither runs a denied call.

// translateSeccomp rewrites s for runsc. unimplemented names the system calls
// the Sentry does not implement at all (it answers them with ENOSYS itself)
// as true and every other call of its table as false. A name missing from
// the table (openat2 in this build) cannot be expressed: runsc ignores it
// ("OCI seccomp: ignoring syscall"), so the call meets the default action
// whatever its rule says; that is listed as a deviation.
func translateSeccomp(s *specs.LinuxSeccomp, unimplemented map[string]bool) (*specs.LinuxSeccomp, []string, error) {
	out := *s
	out.Syscalls = nil
	out.Flags = nil
	var dev []string
	da, d, err := translateAction(s.DefaultAction, s.DefaultErrnoRet, "default action")
	if err != nil {
		return nil, nil, err
	}
	out.DefaultAction, out.DefaultErrnoRet = da, nil
	dev = append(dev, d...)
	for _, rule := range s.Syscalls {
		for _, n := range rule.Names {
			if _, known := unimplemented[n]; !known && len(unimplemented) > 0 && rule.Action != s.DefaultAction {
				dev = append(dev, fmt.Sprintf("%s: not in the Sentry's table, runsc ignores its rule (%s) and the call meets the default action (%s)", n, rule.Action, da))
			}
		}
		if rule.Action == specs.ActErrno && errnoOf(rule.ErrnoRet) == unix.ENOSYS {
			// The Sentry already answers an unimplemented call with ENOSYS:
			// allowing it through the filter gives the same answer.
			var same, other []string
			for _, n := range rule.Names {
				if unimplemented[n] {
					same = append(same, n)
				} else {
					other = append(other, n)
				}
			}
			if len(same) > 0 {
				r := rule
				r.Names, r.Action, r.ErrnoRet = same, specs.ActAllow, nil
				out.Syscalls = append(out.Syscalls, r)
			}
			if len(other) == 0 {
				continue
			}
			rule.Names = other
		}
		a, d, err := translateAction(rule.Action, rule.ErrnoRet, strings.Join(rule.Names, ","))
		if err != nil {
			return nil, nil, err
		}
		rule.Action, rule.ErrnoRet = a, nil
		out.Syscalls = append(out.Syscalls, rule)
		dev = append(dev, d...)
	}
	return &out, dev, nil
}

// errnoOf returns the errno a rule answers with; runc's default is EPERM.
func errnoOf(p *uint) unix.Errno {
	if p == nil {
		return unix.EPERM
	}
	return unix.Errno(*p)
}

// killProcessDeviation says how a kill rule differs once it is a TRAP.
const killProcessDeviation = "SCMP_ACT_KILL_PROCESS becomes SCMP_ACT_TRAP (SIGSYS ends the whole process unless the job handles, ignores or blocks SIGSYS; the call is never executed)"

// translateAction maps one action and says how the result differs.
func translateAction(a specs.LinuxSeccompAction, errno *uint, what string) (specs.LinuxSeccompAction, []string, error) {
	switch a {
	case specs.ActAllow, specs.ActTrap, specs.ActKill:
		return a, nil, nil
	case specs.ActKillThread:
		return specs.ActKill, nil, nil
	case specs.ActKillProcess:
		return specs.ActTrap, []string{what + ": " + killProcessDeviation}, nil
	case specs.ActErrno:
		if e := errnoOf(errno); e != unix.EPERM {
			return specs.ActErrno, []string{fmt.Sprintf("%s: errno %s becomes EPERM", what, unix.ErrnoName(e))}, nil
		}
		return specs.ActErrno, nil, nil
	default:
		return "", nil, fmt.Errorf("seccomp %s: action %s is not supported by runsc's --oci-seccomp", what, a)
	}
}

// unimplementedSyscalls asks runsc which system calls its Sentry does not
// implement at all on this architecture (true) and which others its table
// has (false).
func unimplementedSyscalls(ctx context.Context, runsc string) (map[string]bool, error) {
	out, err := runscCommand(ctx, runsc, 10*time.Second, "help", "syscalls")
	if err != nil {
		return nil, err
	}
	m := map[string]bool{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasSuffix(line, ":") && strings.HasPrefix(line, "linux/") {
			section = strings.TrimSuffix(line, ":")
			continue
		}
		if section != "linux/"+goarchName() {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 3 {
			m[f[1]] = f[2] == "Unimplemented" && strings.Contains(line, "invalid system call number")
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("runsc help syscalls: no table for linux/%s", goarchName())
	}
	return m, nil
}
