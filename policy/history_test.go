package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// previousPolicy is python3.policy as it was before the page-cache and
// inode-counter rules (version 1), kept so that the change stays reviewable:
//
//	awf policy diff policy/testdata/python3-v1.policy policy/python3.policy
const previousPolicy = "testdata/python3-v1.policy"

// TestDiffAgainstPreviousPolicy runs the semantic diff between version 1 and
// the current policy and checks that every changed decision appears, on
// every arch, with the reason of the rule that now decides it, and that
// nothing else changed.
func TestDiffAgainstPreviousPolicy(t *testing.T) {
	old, err := Load(previousPolicy)
	require.NoError(t, err)
	require.Equal(t, 1, old.Version)
	cur, err := Default()
	require.NoError(t, err)
	require.Greater(t, cur.Version, old.Version, "a changed policy raises its version")

	reasonOf := func(syscall, action string) []string {
		var out []string
		for _, r := range cur.Rules {
			if r.Syscall == syscall && tableAction(r.Action) == action {
				out = append(out, r.Reason)
			}
		}
		return out
	}
	// want is, per syscall, the actions its rows now have.
	want := map[string][]string{}
	for _, n := range []string{"accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt",
		"listen", "recvfrom", "recvmsg", "sendmsg", "sendto", "setsockopt", "shutdown"} {
		want[n] = []string{"kill"} // no socket can exist, so the default decides
	}
	for _, n := range []string{"fadvise64", "readahead", "mincore", "cachestat", "remap_file_pages", "pipe", "pipe2", "socket", "socketpair"} {
		want[n] = []string{"errno EPERM"}
	}
	for _, n := range []string{"madvise", "mmap", "preadv2", "pwritev2"} {
		want[n] = []string{"allow", "errno EPERM"}
	}

	for _, arch := range cur.Arches {
		t.Run(arch, func(t *testing.T) {
			a := mustArch(t, arch)
			ot, err := old.Table(arch)
			require.NoError(t, err)
			nt, err := cur.Table(arch)
			require.NoError(t, err)
			lines := Diff(ot, nt)
			require.NotEmpty(t, lines)
			text := strings.Join(lines, "\n")

			changed := map[string]bool{}
			for _, l := range lines {
				// "± ACTION SYSCALL [if CASE | otherwise] (ARCH) : REASON"
				head, reason, ok := strings.Cut(l, " ("+arch+") : ")
				require.True(t, ok, "diff line without its arch and reason: %q", l)
				assert.NotEmpty(t, reason, l)
				f := strings.Fields(head)
				name := f[2]
				if f[1] == "errno" {
					name = f[3]
				}
				changed[name] = true
			}
			for name, actions := range want {
				if _, ok := syscallNumber(name, a); !ok {
					assert.False(t, changed[name], "%s does not exist on %s", name, arch)
					continue
				}
				assert.True(t, changed[name], "%s changed but is not in the diff:\n%s", name, text)
				for _, act := range actions {
					reasons := reasonOf(name, act)
					if len(reasons) == 0 {
						reasons = []string{cur.DefaultReason}
					}
					found := false
					for _, l := range lines {
						for _, why := range reasons {
							rest, ok := strings.CutPrefix(l, "+ "+act+" "+name+" ")
							found = found || ok && strings.HasSuffix(rest, "("+arch+") : "+why)
						}
					}
					assert.True(t, found, "no '+ %s %s' line with its reason in:\n%s", act, name, text)
				}
			}
			for name := range changed {
				assert.Contains(t, want, name, "%s changed, which this change did not mean to do", name)
			}
			// The lines a reviewer reads, spelled out for the headline rules.
			for _, l := range []string{
				"- allow fadvise64 (" + arch + ") : os.posix_fadvise",
				"+ errno EPERM fadvise64 (" + arch + ") : " + reasonOf("fadvise64", "errno EPERM")[0],
				"+ errno EPERM cachestat (" + arch + ") : " + reasonOf("cachestat", "errno EPERM")[0],
				"+ allow preadv2 if arg5 == 0x0 (" + arch + ") : " + reasonOf("preadv2", "allow")[0],
				"+ errno EPERM preadv2 if arg5.hi == 0x0 && arg5 != 0x0 (" + arch + ") : " + reasonOf("preadv2", "errno EPERM")[0],
				"+ errno EPERM madvise if arg2 == 0x3 (MADV_WILLNEED) (" + arch + ") : " + reasonOf("madvise", "errno EPERM")[0],
				"+ errno EPERM madvise if arg2.hi == 0x0 && arg2 > 0x13 (" + arch + ") : " + reasonOf("madvise", "errno EPERM")[1],
				"+ allow madvise if arg2 == 0x4 (MADV_DONTNEED) (" + arch + ") : " + reasonOf("madvise", "allow")[0],
				"- allow socket if arg0 == 0x1 (AF_UNIX) (" + arch + ") : asyncio and libc name service lookups use AF_UNIX sockets; every other family is killed",
				"+ errno EPERM socket (" + arch + ") : " + reasonOf("socket", "errno EPERM")[0],
				"+ errno EPERM pipe2 (" + arch + ") : " + reasonOf("pipe2", "errno EPERM")[0],
				"- allow connect (" + arch + ") : only AF_UNIX sockets can exist",
				"+ kill connect (" + arch + ") : " + cur.DefaultReason,
			} {
				assert.Contains(t, lines, l)
			}
		})
	}
}

// TestInodeCounterCallsCannotBeUsed: every call that creates an object
// numbered from a host-wide inode counter is refused or killed, and the
// reason names the counter.
func TestInodeCounterCallsCannotBeUsed(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	for _, name := range []string{"pipe", "pipe2", "socket", "socketpair", "memfd_create", "memfd_secret", "mq_open",
		"shmget", "io_setup", "userfaultfd", "io_uring_setup"} {
		var rules []Rule
		for _, r := range p.Rules {
			if r.Syscall == name {
				rules = append(rules, r)
			}
		}
		require.Len(t, rules, 1, name)
		r := rules[0]
		assert.Empty(t, r.Conds, name)
		assert.NotEqual(t, ActAllow, r.Action.Kind, name)
		assert.Contains(t, r.Reason, "host-wide counter", name)
	}
	for _, name := range []string{"keyctl", "add_key", "request_key"} {
		assert.True(t, hasRule(p, name, ActKill), "%s: per-uid keyrings outlive a sandbox", name)
	}
}

// TestExploreLeavesEveryListedValue: an "in {…}" list that covers every
// value a one-bit flip reaches, followed by a range, must still yield the
// path that misses the whole list (a search that only flips the low bit
// never finds it and would report a complete but wrong table).
func TestExploreLeavesEveryListedValue(t *testing.T) {
	src := header + "allow madvise if arg2 in {0, 1, 2, 3} : listed\nerrno EPERM madvise if arg2 > 3 : beyond the list\n"
	p, err := Parse("t.policy", []byte(src))
	require.NoError(t, err)
	tb, err := p.Table("x86_64")
	require.NoError(t, err)
	var rows []Row
	for _, r := range tb.Rows {
		if r.Syscall == "madvise" {
			rows = append(rows, r)
		}
	}
	assert.Contains(t, stripNr(rows), Row{Arch: "x86_64", Syscall: "madvise", Case: "arg2.hi == 0x0 && arg2 > 0x3", Action: "errno EPERM"})
	assert.Contains(t, stripNr(rows), Row{Arch: "x86_64", Syscall: "madvise", Case: "arg2.hi > 0x0", Action: "errno EPERM"})
	assert.Len(t, rows, 6)
	for _, r := range rows {
		switch r.Action {
		case "allow":
			assert.Equal(t, "listed", r.Reason)
		case "errno EPERM":
			assert.Equal(t, "beyond the list", r.Reason)
		default:
			t.Errorf("unexpected row %v", r)
		}
	}
	prog, err := p.BPF("x86_64")
	require.NoError(t, err)
	nr, ok := syscallNumber("madvise", mustArch(t, "x86_64"))
	require.True(t, ok)
	for v, want := range map[uint64]string{0: "allow", 3: "allow", 4: "errno EPERM", 0x20: "errno EPERM", 1 << 32: "errno EPERM"} {
		got, err := Evaluate(prog, "x86_64", uint32(nr), [6]uint64{2: v})
		require.NoError(t, err)
		assert.Equal(t, want, got, "madvise advice %#x", v)
	}
}
