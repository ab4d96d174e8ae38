package policy

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// dangerousCalls are system calls whose allow lint always warns about, with
// the one-line why. Most are also refused by the parser (neverAllowed); the
// warning names the risk even where an error already stops the policy, so a
// reviewer reading an imported profile's findings learns why.
var dangerousCalls = map[string]string{
	"io_uring_setup":    "io_uring runs I/O from kernel workers that seccomp never sees",
	"io_uring_enter":    "io_uring runs I/O from kernel workers that seccomp never sees",
	"io_uring_register": "io_uring runs I/O from kernel workers that seccomp never sees",
	"userfaultfd":       "lets user space stall kernel page faults, the classic race-widening exploit primitive",
	"bpf":               "loads eBPF programs and maps into the kernel: large attack surface and shared state",
	"perf_event_open":   "hardware counters and kernel tracing: side channels and a long exploit history",
	"keyctl":            "kernel keyrings are shared and outlive the sandbox (a channel to later runs)",
	"add_key":           "kernel keyrings are shared and outlive the sandbox (a channel to later runs)",
	"request_key":       "kernel keyrings are shared and outlive the sandbox (a channel to later runs)",
	"ptrace":            "reads and writes other processes' memory and registers",
	"process_vm_readv":  "reads other processes' memory",
	"process_vm_writev": "writes other processes' memory",
	"kexec_load":        "replaces the running kernel",
	"kexec_file_load":   "replaces the running kernel",
	"init_module":       "loads code into the kernel",
	"finit_module":      "loads code into the kernel",
	"mount":             "changes the mount table: hides or exposes files, escapes with a namespace",
	"umount":            "changes the mount table: uncovers what a mount hid",
	"umount2":           "changes the mount table: uncovers what a mount hid",
	"move_mount":        "changes the mount table (new mount API)",
	"open_tree":         "clones mount trees (new mount API)",
	"fsopen":            "creates filesystem contexts (new mount API)",
	"fsconfig":          "configures filesystem contexts (new mount API)",
	"fsmount":           "creates mounts (new mount API)",
	"fspick":            "reconfigures existing mounts (new mount API)",
	"mount_setattr":     "changes mount flags such as read-only and nosuid",
	"pivot_root":        "changes the root filesystem",
	"open_by_handle_at": "opens files by handle, bypassing path checks (the shocker container escape)",
	"name_to_handle_at": "reveals file handles that open_by_handle_at turns into escapes, and inode identities",
	"unshare":           "creates namespaces: user namespaces unlock kernel code that needs privilege",
	"clone3":            "its flags, including every CLONE_NEW*, sit in memory that seccomp cannot read",
}

// dangerousIoctls are ioctl commands lint warns about in an allow-list.
var dangerousIoctls = []struct {
	name string
	cmd  uint64
	why  string
}{
	{"TIOCSTI", unix.TIOCSTI, "pushes characters into a terminal's input queue: commands typed into the session outside the sandbox"},
	{"TIOCLINUX", 0x541C, "virtual-console controls: selection paste into other sessions, console state"},
	{"TIOCSETD", unix.TIOCSETD, "changes the line discipline, which autoloads rarely used kernel modules"},
}

// personalityQuery is personality(0xffffffff): read the domain, change nothing.
const personalityQuery = 0xffffffff

// dangerousAllow returns the warnings for one allow rule: dangerous calls,
// and dangerous arguments of calls a policy may otherwise need.
func dangerousAllow(r Rule) []string {
	var out []string
	if why, ok := dangerousCalls[r.Syscall]; ok {
		out = append(out, fmt.Sprintf("allows %s: %s", r.Syscall, why))
	}
	switch r.Syscall {
	case "ioctl":
		for _, d := range dangerousIoctls {
			if condAdmits(r, 1, d.cmd) {
				out = append(out, fmt.Sprintf("allows ioctl %s: %s", d.name, d.why))
			}
		}
	case "clone":
		if v, ok := condAdmitsAny(r, 0, func(v uint64) bool { return v&namespaceFlags != 0 }); ok {
			out = append(out, fmt.Sprintf("allows clone with namespace flags (for example %#x): a new user namespace unlocks kernel code that needs privilege", v))
		}
	case "personality":
		if v, ok := condAdmitsAny(r, 0, func(v uint64) bool { return v&0xffffffff != personalityQuery }); ok {
			out = append(out, fmt.Sprintf("allows personality %#x, not only the query 0xffffffff: execution domains such as ADDR_NO_RANDOMIZE weaken ASLR", v))
		}
	case "socket", "socketpair":
		if v, ok := condAdmitsAny(r, 0, func(v uint64) bool { return v&0xffffffff != unix.AF_UNIX }); ok {
			out = append(out, fmt.Sprintf("allows %s family %s beyond AF_UNIX: network stacks are kernel attack surface and a way out", r.Syscall, valueName(r.Syscall, 0, v)))
		}
	}
	return out
}

// condAdmits reports whether r's conditions on arg can hold for v (the
// other arguments are assumed to match).
func condAdmits(r Rule, arg uint, v uint64) bool {
	only := Rule{}
	for _, c := range r.Conds {
		if c.Arg == arg {
			only.Conds = append(only.Conds, c)
		}
	}
	var args [6]uint64
	args[arg] = v
	return only.matches(args)
}

// condAdmitsAny finds a value r admits on arg for which bad holds. It tries
// the boundary values of r's conditions on arg and of the kernel's flag and
// family ranges, which is where an admitted bad value must show.
func condAdmitsAny(r Rule, arg uint, bad func(uint64) bool) (uint64, bool) {
	probes := []uint64{unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK, unix.AF_PACKET, unix.AF_VSOCK, 0, 1,
		0x0040000 /* ADDR_NO_RANDOMIZE */, 0x8, 0x20000, 0x20008, personalityQuery, ^uint64(0)}
	for _, f := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET} {
		probes = append(probes, f, f|unix.CLONE_THREAD|unix.CLONE_VM|unix.CLONE_SIGHAND)
	}
	for _, c := range r.Conds {
		if c.Arg != arg {
			continue
		}
		for _, v := range c.Values {
			probes = append(probes, v-1, v, v+1)
			if c.HasMask {
				for _, f := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUSER, unix.CLONE_NEWNET, unix.CLONE_NEWPID, 0x2} {
					probes = append(probes, v|f&^c.Mask, v|f)
				}
			}
		}
	}
	for _, p := range probes {
		if bad(p) && condAdmits(r, arg, p) {
			return p, true
		}
	}
	return 0, false
}

// valueName spells v symbolically where the argument has a known family.
func valueName(syscall string, arg uint, v uint64) string {
	if n := labelValue(syscall, arg, v); n != "" {
		return n
	}
	return fmt.Sprintf("%#x", v)
}
