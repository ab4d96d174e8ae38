package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLintDefaultIsClean(t *testing.T) {
	assert.Empty(t, Lint(DefaultName, DefaultSource()))
}

func TestLintFindings(t *testing.T) {
	cases := []struct {
		name, rules string
		want        string
		sev         Severity
	}{
		{"unknown name", "allow frobnicate : does things", "5:7: error: unknown system call", SevError},
		{"duplicate", "allow read : reading\nallow read : again", "duplicate rule for read", SevError},
		{"dangerous allow", "allow mount : mounting things", "mount may never be allowed", SevError},
		{"sensitive without mark", "allow execve : run the interpreter", "dangerous allow: execve runs new programs", SevError},
		{"ioctl without condition", "allow ioctl +sensitive : terminals", "ioctl must be restricted by an argument condition", SevError},
		{"missing reason", "allow read", "missing reason", SevError},
		{"empty reason", "allow read : read", "does not explain anything", SevError},
		{"needless mark", "allow read +sensitive : reading files", "not on the sensitive list", SevWarning},
		{"mark on deny", "kill ptrace +sensitive : other processes", "does not allow ptrace", SevWarning},
		{"nothing for arch", "allow arch_prctl : thread pointer", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := Lint("t.policy", []byte(header+tc.rules+"\n"))
			if tc.want == "" {
				assert.Empty(t, fs)
				return
			}
			require.NotEmpty(t, fs)
			var all []string
			for _, f := range fs {
				all = append(all, f.String())
			}
			joined := strings.Join(all, "\n")
			assert.Contains(t, joined, tc.want)
			assert.Contains(t, joined, string(tc.sev)+": ")
			assert.Equal(t, tc.sev == SevError, HasErrors(fs))
		})
	}
	fs := Lint("t.policy", []byte("version 1\ndefault kill : fatal calls\narch x86_64 aarch64\ngroup g : g\nallow arch_prctl : x86 only\n"))
	require.Len(t, fs, 1)
	assert.Contains(t, fs[0].Msg, "no rule applies on aarch64")
}

// TestLintDangerousArguments: each dangerous rule added to a copy of the
// default policy (replacing its rules for that call) gives its warning, and
// the safe variants give none.
func TestLintDangerousArguments(t *testing.T) {
	base := strings.Split(string(DefaultSource()), "\n")
	with := func(syscall, rule string) []byte {
		var out []string
		for _, l := range base {
			f := strings.Fields(l)
			if len(f) > 1 && (f[0] == "allow" || f[0] == "kill") && f[1] == syscall ||
				len(f) > 2 && f[0] == "errno" && f[2] == syscall {
				continue
			}
			out = append(out, l)
		}
		out = append(out, "group danger : a rule under test", rule)
		return []byte(strings.Join(out, "\n") + "\n")
	}
	warned := func(fs []Finding, line int) []string {
		var out []string
		for _, f := range fs {
			if f.Severity == SevWarning && f.Line == line {
				out = append(out, f.Msg)
			}
		}
		return out
	}
	lastLine := func(src []byte) int { return strings.Count(string(src), "\n") }

	cases := []struct {
		name, syscall, rule, want string
	}{
		{"TIOCSTI", "ioctl", "allow ioctl if arg1 & 0xffffffff in {TCGETS, TIOCSTI} +sensitive : terminal", "allows ioctl TIOCSTI: pushes characters"},
		{"TIOCLINUX", "ioctl", "allow ioctl if arg1 & 0xffffffff in {TCGETS, TIOCLINUX} +sensitive : terminal", "allows ioctl TIOCLINUX"},
		{"TIOCSETD", "ioctl", "allow ioctl if arg1 & 0xffffffff in {TCGETS, TIOCSETD} +sensitive : terminal", "allows ioctl TIOCSETD: changes the line discipline"},
		{"ioctl range", "ioctl", "allow ioctl if arg1 >= 0x5400 +sensitive : terminal", "allows ioctl TIOCSTI"},
		{"clone NEWUSER", "clone", "allow clone if arg0 & 0x7e030100 == 0x10010100 +sensitive : threads", "allows clone with namespace flags"},
		{"clone narrow mask", "clone", "allow clone if arg0 & 0x10100 == 0x10100 +sensitive : threads", "allows clone with namespace flags"},
		{"clone3", "clone3", "allow clone3 : threads", "allows clone3: its flags"},
		{"unshare", "unshare", "allow unshare : namespaces", "allows unshare: creates namespaces"},
		{"personality set", "personality", "allow personality if arg0 == 0x40000 +sensitive : domains", "allows personality 0x40000, not only the query"},
		{"personality any", "personality", "allow personality +sensitive : domains", "not only the query 0xffffffff"},
		{"socket inet", "socket", "allow socket if arg0 == AF_INET +sensitive : network", "allows socket family AF_INET beyond AF_UNIX"},
		{"socket any", "socket", "allow socket if arg0 != AF_UNIX +sensitive : network", "beyond AF_UNIX"},
		{"socketpair", "socketpair", "allow socketpair +sensitive : pairs", "allows socketpair family AF_INET beyond AF_UNIX"},
	}
	for _, n := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "bpf", "perf_event_open",
		"keyctl", "add_key", "request_key", "ptrace", "process_vm_readv", "process_vm_writev", "kexec_load", "kexec_file_load",
		"init_module", "finit_module", "mount", "umount2", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
		"mount_setattr", "pivot_root", "open_by_handle_at", "name_to_handle_at"} {
		cases = append(cases, struct{ name, syscall, rule, want string }{n, n, "allow " + n + " : under test", "allows " + n + ": "})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := with(tc.syscall, tc.rule)
			ws := warned(Lint("copy.policy", src), lastLine(src))
			require.NotEmpty(t, ws, "no warning for %s", tc.rule)
			assert.Contains(t, strings.Join(ws, "\n"), tc.want)
			for _, w := range ws {
				_, why, ok := strings.Cut(w, ": ")
				assert.True(t, ok && len(why) > 10, "each warning says why: %q", w)
			}
		})
	}
	safe := []struct{ syscall, rule string }{
		{"personality", "allow personality if arg0 == 0xffffffff +sensitive : read the execution domain"},
		{"socket", "allow socket if arg0 == AF_UNIX +sensitive : local sockets"},
		{"ioctl", "allow ioctl if arg1 & 0xffffffff in {TCGETS, FIONREAD} +sensitive : terminal"},
		{"clone", "allow clone if arg0 & 0x7e030100 == 0x10100 +sensitive : threads"},
	}
	for _, s := range safe {
		src := with(s.syscall, s.rule)
		assert.Empty(t, warned(Lint("copy.policy", src), lastLine(src)), s.rule)
	}
}
