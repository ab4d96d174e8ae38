package verify

import (
	"fmt"
	"strconv"
	"strings"
)

// sCap is the state of one capability set.
var sCap = sEnum("zero", "nonzero", "absent")

// deniedErrnos are the errors that mean a call was stopped before it did
// anything: by the seccomp filter or by the kernel's own permission check.
var deniedErrnos = []string{"EPERM", "EACCES", "ENOSYS"}

// checkDenied passes when every named field is a denial errno. Any other
// error means the call reached the kernel's argument handling, so the
// filter does not deny it.
func checkDenied(fields ...string) func(c *probeCtx) (Status, string) {
	return func(c *probeCtx) (Status, string) {
		how, bad := c.outcomes(fields, func(v string) bool { return !oneOf(v, deniedErrnos...) })
		if len(bad) > 0 {
			return Fail, fmt.Sprintf("not denied: %s reached the kernel (%s)", strings.Join(bad, ", "), strings.Join(how, " "))
		}
		return Pass, "denied: " + strings.Join(how, " ")
	}
}

// syscallProbe builds a probe that makes one raw system call with harmless
// arguments; the call must be denied.
func syscallProbe(id, title, onFail, setup, call string) Probe {
	return Probe{
		ID: id, Title: title, OnFail: onFail,
		body:    setup + "r, v = " + call + "\nanswer({\"call\": r})\n",
		schema:  errnoFields("call"),
		check:   checkDenied("call"),
		example: `{"call":"EPERM"}`,
	}
}

// privilegeProbes check identity, capabilities and every privileged or
// dangerous kernel interface.
func privilegeProbes() []Probe {
	const u32 = 4294967295
	return inGroup("privilege", []Probe{
		wantProbe("priv/ids", "Reads the real and effective uid and gid, and the supplementary groups other than 65534.",
			"The script does not run as the unprivileged uid 65534 with no other groups.",
			sObj("uid", sInt(0, u32), "euid", sInt(0, u32), "gid", sInt(0, u32), "egid", sInt(0, u32), "groups", sInt(0, 64)),
			`{"uid":65534,"euid":65534,"gid":65534,"egid":65534,"groups":0}`),
		{
			ID:     "priv/caps",
			Title:  "Reads CapInh, CapPrm, CapEff, CapBnd and CapAmb from /proc/self/status (from the host where the sandbox has no /proc): all must be empty.",
			OnFail: "The process holds or can regain capabilities (a non-empty bounding set means a setuid or file-capability binary could grant them).",
			schema: sObj("inh", sCap, "prm", sCap, "eff", sCap, "bnd", sCap, "amb", sCap),
			check: func(c *probeCtx) (Status, string) {
				var bad, absent []string
				noProc, suffix := true, ""
				for _, k := range []string{"inh", "prm", "eff", "bnd", "amb"} {
					noProc = noProc && c.str(k) == "absent"
				}
				state := c.str
				if noProc {
					if c.job.status == nil {
						return Fail, "capability sets can be read neither from inside nor from the host"
					}
					suffix = fromHost
					state = func(k string) string {
						v, ok := c.job.status["Cap"+strings.ToUpper(k[:1])+k[1:]]
						n, err := strconv.ParseUint(v, 16, 64)
						switch {
						case !ok:
							return "absent"
						case err != nil || n != 0:
							return "nonzero"
						}
						return "zero"
					}
				}
				for _, k := range []string{"inh", "prm", "eff", "bnd", "amb"} {
					name := "Cap" + strings.ToUpper(k[:1]) + k[1:]
					switch v := state(k); {
					case v == "zero":
					case v == "absent" && k == "amb":
						absent = append(absent, name)
					default:
						bad = append(bad, name+" "+v)
					}
				}
				if len(bad) > 0 {
					return Fail, "capability sets not proven empty: " + strings.Join(bad, ", ") + suffix
				}
				if len(absent) > 0 {
					return Pass, "CapInh CapPrm CapEff CapBnd are 0; " + strings.Join(absent, " ") + " is not reported by this kernel" + suffix
				}
				return Pass, "CapInh CapPrm CapEff CapBnd CapAmb are all 0" + suffix
			},
			example: `{"inh":"zero","prm":"zero","eff":"zero","bnd":"zero","amb":"zero"}`,
		},
		{
			ID:     "priv/no-new-privs",
			Title:  "Reads NoNewPrivs from /proc/self/status (from the host where the sandbox has no /proc).",
			OnFail: "A setuid or file-capability binary could raise privileges.",
			schema: sObj("nnp", sInt(-2, 1)),
			check: func(c *probeCtx) (Status, string) {
				if c.num("nnp") == -2 {
					switch c.job.status["NoNewPrivs"] {
					case "1":
						return Pass, "NoNewPrivs 1" + fromHost
					case "":
						return Fail, "NoNewPrivs can be read neither from inside nor from the host"
					}
					return Fail, "NoNewPrivs " + c.job.status["NoNewPrivs"] + ": a setuid or file-capability binary could raise privileges" + fromHost
				}
				switch c.num("nnp") {
				case 1:
					return Pass, "NoNewPrivs 1"
				case -1:
					if c.traits.procLacksNNP {
						return NotApplicable, "this runtime's /proc does not report NoNewPrivs, so it cannot be proven from inside; the runtime must set it in its configuration"
					}
					return Fail, "/proc/self/status has no NoNewPrivs line"
				}
				return Fail, "NoNewPrivs 0: a setuid or file-capability binary could raise privileges"
			},
			example: `{"nnp":1}`,
		},
		{
			ID:     "priv/seccomp-mode",
			Title:  "Reads Seccomp and Seccomp_filters from /proc/self/status (from the host where the sandbox has no /proc): filter mode with at least one filter.",
			OnFail: "No seccomp filter is loaded: the whole kernel system-call surface is open.",
			schema: sObj("mode", sInt(-1, 2), "filters", sInt(-1, 64)),
			check: func(c *probeCtx) (Status, string) {
				mode, n := c.num("mode"), c.num("filters")
				if mode == -1 {
					st := c.job.status
					m, err1 := strconv.Atoi(st["Seccomp"])
					f, err2 := strconv.Atoi(st["Seccomp_filters"])
					if err1 != nil || err2 != nil {
						return Fail, "the seccomp mode can be read neither from inside nor from the host"
					}
					if m != 2 || f == 0 {
						return Fail, fmt.Sprintf("seccomp mode %d with %d filters; want mode 2 (filter) with a filter", m, f) + fromHost
					}
					return Pass, fmt.Sprintf("seccomp mode 2 with %d filter(s)", f) + fromHost
				}
				switch {
				case mode != 2 || n == 0:
					return Fail, fmt.Sprintf("seccomp mode %d with %d filters; want mode 2 (filter) with a filter", mode, n)
				case n < 0:
					// gVisor's procfs reports the mode but has no filter count.
					return Pass, "seccomp mode 2 (the kernel does not report a filter count)"
				}
				return Pass, fmt.Sprintf("seccomp mode 2 with %d filter(s)", n)
			},
			example: `{"mode":2,"filters":1}`,
		},
		wantProbe("priv/setuid-files", "Searches the whole tree for setuid and setgid files.",
			"A setuid or setgid file exists in the sandbox's view.", sObj("setid", sInt(0, 64)), `{"setid":0}`),
		blockedProbe("priv/unshare-userns", "Calls unshare(CLONE_NEWUSER).",
			"The script can create a user namespace and gain full capabilities inside it: a large kernel attack surface.",
			`{"unshare":"EPERM"}`, "unshare"),
		{
			ID:      "priv/userns-mount",
			Title:   "Calls unshare(CLONE_NEWUSER|CLONE_NEWNS) and then mounts a tmpfs: the classic escalation chain.",
			OnFail:  "The script became root in a nested user namespace and mounted a filesystem.",
			schema:  errnoFields("unshare", "mount"),
			check:   checkAnyBlocked("unshare", "mount"),
			example: `{"unshare":"EPERM","mount":"other"}`,
		},
		blockedProbe("priv/setns", "Opens /proc/self/ns/net and calls setns on it.",
			"The script can enter namespaces.", `{"setns":"EPERM"}`, "setns"),
		blockedProbe("priv/mount", "Mounts a tmpfs on /tmp directly.",
			"The script can change its mount table.", `{"mount":"EPERM"}`, "mount"),
		blockedProbe("priv/chroot", "Calls chroot(\"/tmp\").",
			"The script can chroot, the first step of several escapes.", `{"chroot":"EPERM"}`, "chroot"),
		{
			ID:      "priv/ptrace",
			Title:   "Calls ptrace(PTRACE_PEEKUSER) on its own pid: ESRCH means the call reached the kernel.",
			OnFail:  "ptrace is not denied: the script could inspect or control other processes it can reach.",
			schema:  errnoFields("ptrace"),
			check:   checkDenied("ptrace"),
			example: `{"ptrace":"EPERM"}`,
		},
		syscallProbe("priv/bpf", "Creates a one-entry BPF array map.",
			"bpf is reachable: a frequent source of kernel exploits.",
			"import ctypes, struct\nattr = ctypes.create_string_buffer(struct.pack(\"IIII\", 2, 4, 4, 1) + bytes(112))\n",
			`sysc("bpf", 0, attr, 128)`),
		blockedProbe("priv/keyctl", "Adds a key to its process keyring and looks up its session keyring.",
			"The kernel keyrings are reachable: a persistent cross-sandbox channel and a kernel attack surface.",
			`{"add_key":"EPERM","keyctl":"EPERM"}`, "add_key", "keyctl"),
		syscallProbe("priv/userfaultfd", "Creates a user-mode-only userfaultfd.",
			"userfaultfd is reachable: an exploit primitive for kernel races.",
			"", `sysc("userfaultfd", 0o2000000 | 0o4000 | 1)`),
		syscallProbe("priv/perf-event-open", "Opens a software CPU-clock perf event on itself, user space only.",
			"perf_event_open is reachable: side channels and kernel attack surface.",
			"import ctypes, struct\nattr = ctypes.create_string_buffer(struct.pack(\"IIQQQQQ\", 1, 128, 0, 0, 0, 0, 0x61) + bytes(80))\n",
			`sysc("perf_event_open", attr, 0, -1, -1, 0)`),
		syscallProbe("priv/io-uring", "Sets up a one-entry io_uring.",
			"io_uring is reachable: its operations bypass seccomp, and it is a frequent kernel exploit target.",
			"import ctypes\nparams = ctypes.create_string_buffer(120)\n",
			`sysc("io_uring_setup", 1, params)`),
		blockedProbe("priv/clone-newns", "Calls clone(CLONE_NEWUSER|CLONE_NEWNS) and clone3 with CLONE_NEWUSER.",
			"The script can create namespaces through clone, bypassing an unshare-only rule.",
			`{"clone":"EPERM","clone3":"ENOSYS"}`, "clone", "clone3"),
		blockedProbe("priv/setuid", "Calls setuid(0) and setgid(0).",
			"The script can change its identity.", `{"setuid":"EPERM","setgid":"EPERM"}`, "setuid", "setgid"),
		syscallProbe("priv/process-vm", "Calls process_vm_readv on pid 1 with no buffers.",
			"Cross-process memory access is reachable.", "", `sysc("process_vm_readv", 1, None, 0, None, 0, 0)`),
		syscallProbe("priv/open-tree", "Calls open_tree on / (new mount API).",
			"The new mount API is reachable.", "", `sysc("open_tree", -100, b"/", 0)`),
		syscallProbe("priv/pidfd-open", "Calls pidfd_open on its own pid.",
			"pidfds are reachable: signals and fd theft across processes.", "", `sysc("pidfd_open", os.getpid(), 0)`),
		syscallProbe("priv/memfd", "Creates an anonymous memory file with memfd_create.",
			"Scripts can build executables in memory and run them without touching a noexec mount.", "", `sysc("memfd_create", b"awf-verify", 0)`),
		syscallProbe("priv/mknod", "Creates a FIFO in /tmp with mknodat.",
			"Device and FIFO nodes can be created.", "", `sysc("mknodat", -100, b"/tmp/awf-verify-node", 0o010600, 0)`),
		{
			ID:     "priv/proc-pids",
			Title:  "Counts the processes visible in /proc: only the sandbox's own.",
			OnFail: "The sandbox shares a pid namespace: it can see, and maybe signal, host processes.",
			schema: sObj("pids", sInt(0, 64), "self", sInt(0, 100000)),
			check: func(c *probeCtx) (Status, string) {
				if c.num("pids") > 4 {
					return Fail, fmt.Sprintf("%d processes visible (capped at 64); pid %d", c.num("pids"), c.num("self"))
				}
				return Pass, fmt.Sprintf("%d processes visible; own pid %d", c.num("pids"), c.num("self"))
			},
			example: `{"pids":1,"self":1}`,
		},
		wantProbe("priv/uts", "Compares the sandbox's hostname with the host's.",
			"The sandbox shares the host's UTS namespace and learns the host name.", sObj("same", sBool), `{"same":false}`),
		{
			ID:     "priv/cgroupns",
			Title:  "Reads /proc/self/cgroup: every hierarchy must show the namespace root.",
			OnFail: "The sandbox sees its host cgroup path (run ids, layout): no cgroup namespace.",
			schema: sObj("lines", sInt(0, 64), "root_only", sBool),
			check: func(c *probeCtx) (Status, string) {
				if !c.flag("root_only") {
					return Fail, fmt.Sprintf("%d cgroup lines, some show a host path", c.num("lines"))
				}
				return Pass, fmt.Sprintf("%d cgroup lines, all at the namespace root", c.num("lines"))
			},
			example: `{"lines":1,"root_only":true}`,
		},
		{
			ID:     "priv/env",
			Title:  "Looks for credential variables (tokens, keys, SSH agent, askpass) in the environment.",
			OnFail: "Credentials reach the sandbox.",
			schema: sObj("credentials", sInt(0, 64), "vars", sInt(0, 64)),
			check: func(c *probeCtx) (Status, string) {
				if n := c.num("credentials"); n > 0 {
					return Fail, fmt.Sprintf("%d credential variables in the sandbox environment", n)
				}
				return Pass, fmt.Sprintf("no credential variable among %d", c.num("vars"))
			},
			example: `{"credentials":0,"vars":3}`,
		},
		wantProbe("priv/fds", "Finds every open descriptor below 4096 with fstat: only stdin, stdout and stderr may be open.",
			"A descriptor of the broker leaked into the sandbox.", sObj("extra", sInt(0, 64)), `{"extra":0}`),
	})
}
