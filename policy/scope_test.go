package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// loopHeader is header with the enclave-loop scope line (rules start on line 6).
const loopHeader = "version 3\ndefault kill : unknown calls are fatal\narch x86_64\nscope enclave-loop : the loop dials the proxy\ngroup g : a group\n"

// loopSocket is the one socket rule an enclave-loop policy may have, with
// the EPERM rules that cover every other argument triple.
const loopSocket = "allow socket if arg0 == AF_INET && arg1 == SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC && arg2 in {0, IPPROTO_TCP} +sensitive : tcp to the proxy\n" +
	"errno EPERM socket if arg0 != AF_INET : other families\n" +
	"errno EPERM socket if arg1 != SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC : other types\n" +
	"errno EPERM socket if arg2 > IPPROTO_TCP : other protocols\n" +
	"errno EPERM socket if arg2 in {1, 2, 3, 4, 5} : other protocols\n"

// TestScopeAllowsInet is the twin of TestParseErrors' "socket inet": the
// same AF_INET allow that no query policy may have parses under the
// enclave-loop scope, in the one shape the scope admits.
func TestScopeAllowsInet(t *testing.T) {
	_, err := Parse("t.policy", []byte(header+"allow socket if arg0 == AF_INET +sensitive : x"))
	require.ErrorContains(t, err, "socket may only be allowed with arg0 == AF_UNIX", "without the scope line AF_INET stays refused")

	p, err := Parse("t.policy", []byte(loopHeader+loopSocket))
	require.NoError(t, err)
	assert.Equal(t, ScopeEnclaveLoop, p.Scope)
	assert.Equal(t, "the loop dials the proxy", p.ScopeReason)
	assert.Contains(t, p.Canonical(), "\nscope enclave-loop : the loop dials the proxy\n")
	q, err := Parse("c.policy", []byte(p.Canonical()))
	require.NoError(t, err)
	assert.Equal(t, p.Digest(), q.Digest(), "the canonical form keeps the scope")

	// The scope is part of what a reviewer signs: the same rules without it
	// are another policy.
	plain, err := Parse("a", []byte(header+"allow read : read files\n"))
	require.NoError(t, err)
	scoped, err := Parse("b", []byte(loopHeader+"allow read : read files\n"))
	require.NoError(t, err)
	assert.NotEqual(t, plain.Digest(), scoped.Digest())

	// The masked form of the type is admitted too (the kernel takes the
	// type from the low four bits and refuses other flags with EINVAL).
	_, err = Parse("t.policy", []byte(loopHeader+"allow socket if arg0 == AF_INET && arg1 & 0xf == SOCK_STREAM && arg2 == 0 +sensitive : tcp to the proxy\n"))
	require.NoError(t, err)
}

func TestScopeErrors(t *testing.T) {
	const narrow = "the loop only dials"
	cases := []struct{ name, src, want string }{
		{"query policies keep AF_UNIX only", header + "allow socket if arg0 == AF_INET && arg1 == 0x80801 && arg2 == 0 +sensitive : x", "socket may only be allowed with arg0 == AF_UNIX"},
		{"inet6", loopHeader + "allow socket if arg0 == AF_INET6 && arg1 == 0x80801 && arg2 == 0 +sensitive : " + narrow, "socket may only be allowed in an enclave-loop policy as arg0 == AF_INET"},
		{"family only", loopHeader + "allow socket if arg0 == AF_INET +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"no protocol", loopHeader + "allow socket if arg0 == AF_INET && arg1 == 0x80801 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"dgram", loopHeader + "allow socket if arg0 == AF_INET && arg1 == 2 && arg2 == 0 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"raw", loopHeader + "allow socket if arg0 == AF_INET && arg1 & 0xf == 3 && arg2 == 0 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"type mask hides the type", loopHeader + "allow socket if arg0 == AF_INET && arg1 & 0x7 == 1 && arg2 == 0 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"unknown flag", loopHeader + "allow socket if arg0 == AF_INET && arg1 == 0x100001 && arg2 == 0 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"sctp", loopHeader + "allow socket if arg0 == AF_INET && arg1 == 1 && arg2 == 132 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"family range", loopHeader + "allow socket if arg0 <= AF_INET && arg1 == 1 && arg2 == 0 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"family narrow mask", loopHeader + "allow socket if arg0 & 0x3 == AF_INET && arg1 == 1 && arg2 == 0 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"extra argument", loopHeader + "allow socket if arg0 == AF_INET && arg1 == 1 && arg2 == 0 && arg3 == 0 +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"unix", loopHeader + "allow socket if arg0 == AF_UNIX +sensitive : " + narrow, "only be allowed in an enclave-loop policy"},
		{"socketpair", loopHeader + "allow socketpair if arg0 == AF_UNIX +sensitive : " + narrow, "socketpair may not be allowed in an enclave-loop policy"},
		{"bind", loopHeader + "allow bind : " + narrow, "bind may not be allowed in an enclave-loop policy"},
		{"listen", loopHeader + "allow listen : " + narrow, "listen may not be allowed"},
		{"accept4", loopHeader + "allow accept4 : " + narrow, "accept4 may not be allowed"},
		{"never allowed still", loopHeader + "allow ptrace : " + narrow, "ptrace may never be allowed"},
		{"unknown scope", "version 1\ndefault kill : x\narch x86_64\nscope query : x\n", "scope takes one name: enclave-loop"},
		{"scope needs a reason", "version 1\ndefault kill : x\narch x86_64\nscope enclave-loop\n", "missing reason"},
		{"duplicate scope", "version 1\ndefault kill : x\narch x86_64\nscope enclave-loop : x\nscope enclave-loop : y\n", "duplicate scope line"},
		{"scope after a group", header + "scope enclave-loop : x\n", "the scope line must come before the first group"},
		{"overlap still refused", loopHeader + loopSocket + "errno EACCES socket if arg1 in {0x80801, 2} : x", "not simple equalities on one argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.policy", []byte(tc.src))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestDisjointRules: rules with different actions may compare several
// arguments when one argument both compare keeps them apart; anything a
// reviewer could not settle is still refused.
func TestDisjointRules(t *testing.T) {
	ok := []string{
		"allow fcntl if arg0 == 3 && arg1 == 1 : on fd 3\nerrno EPERM fcntl if arg1 != 1 : other commands",
		"allow fcntl if arg0 == 3 && arg1 == 1 : on fd 3\nerrno EPERM fcntl if arg0 > 3 && arg2 == 0 : higher fds",
		"allow fcntl if arg1 & 0xf == 1 && arg2 == 0 : type one\nerrno EPERM fcntl if arg1 & 0x1 == 0 : even types",
		"allow fcntl if arg1 == 0x11 && arg2 == 0 : exact\nerrno EPERM fcntl if arg1 & 0xf0 in {0, 0x20} : other high nibbles",
	}
	for _, src := range ok {
		_, err := Parse("t.policy", []byte(header+src))
		assert.NoError(t, err, "%s", src)
	}
	bad := []string{
		"allow fcntl if arg0 == 3 && arg1 == 1 : on fd 3\nerrno EPERM fcntl if arg2 != 1 : other",          // no common argument
		"allow fcntl if arg0 == 3 && arg1 == 1 : on fd 3\nerrno EPERM fcntl if arg1 <= 1 : small commands", // overlap on arg1
		"allow fcntl if arg1 & 0xf == 1 && arg2 == 0 : type one\nerrno EPERM fcntl if arg1 & 0x3 == 1 : odd types",
		"allow fcntl if arg1 & 0xf == 1 && arg2 == 0 : type one\nerrno EPERM fcntl if arg1 > 0x10 : large", // a range against a mask
	}
	for _, src := range bad {
		_, err := Parse("t.policy", []byte(header+src))
		assert.ErrorContains(t, err, "reviewers could not tell which wins", "%s", src)
	}
}

// TestAgentLoopPolicyParsesAndLints: the shipped enclave-loop policy lints
// with no error; its only warning is the AF_INET allow, which the scope
// exists for.
func TestAgentLoopPolicyParsesAndLints(t *testing.T) {
	p, err := AgentLoop()
	require.NoError(t, err)
	assert.Equal(t, ScopeEnclaveLoop, p.Scope)
	assert.Equal(t, Action{Kind: ActKill}, p.DefaultAction)
	assert.Equal(t, []string{"x86_64", "aarch64"}, p.Arches)
	src, err := os.ReadFile(AgentLoopName)
	require.NoError(t, err)
	assert.Equal(t, src, agentLoopSource, "the embedded copy is the file")
	fs := Lint(AgentLoopName, src)
	assert.False(t, HasErrors(fs), "%v", fs)
	require.Len(t, fs, 1, "%v", fs)
	assert.Contains(t, fs[0].Msg, "allows socket family AF_INET beyond AF_UNIX")
	for _, r := range p.Rules {
		assert.NotEmpty(t, r.Reason, "line %d", r.Line)
		if r.Action.Kind == ActAllow {
			assert.NotContains(t, []string{"bind", "listen", "accept", "accept4", "socketpair", "ioctl", "mprotect", "prctl"}, r.Syscall)
		}
	}
}

// loopSocketWant is what agent-loop.policy must decide for socket(a0, a1, a2).
func loopSocketWant(a0, a1, a2 uint64) string {
	if a0 == unix.AF_INET && a1 == unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC && (a2 == 0 || a2 == unix.IPPROTO_TCP) {
		return "allow"
	}
	return "errno EPERM"
}

// TestAgentLoopSocketDecisions runs the compiled program of both
// architectures on every combination of families, types and protocols
// (with high bits set, as the kernel would ignore them): exactly TCP over
// IPv4 is allowed, everything else answers EPERM, socketpair always does,
// and bind, listen and accept are killed.
func TestAgentLoopSocketDecisions(t *testing.T) {
	p, err := AgentLoop()
	require.NoError(t, err)
	const hi = 1 << 32
	families := []uint64{unix.AF_UNSPEC, unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK, unix.AF_PACKET, unix.AF_VSOCK, unix.AF_ALG, unix.AF_XDP, hi | unix.AF_INET, 0xffffffff}
	types := []uint64{0, unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_SEQPACKET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC,
		unix.SOCK_STREAM | unix.SOCK_NONBLOCK, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC,
		unix.SOCK_RAW | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, hi | unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC}
	protos := []uint64{0, 1, 2, 3, 5, unix.IPPROTO_TCP, 7, unix.IPPROTO_UDP, unix.IPPROTO_SCTP, unix.IPPROTO_MPTCP, 255, hi, hi | unix.IPPROTO_TCP}
	for _, arch := range p.Arches {
		prog, err := p.BPF(arch)
		require.NoError(t, err)
		info, err := lookupArch(arch)
		require.NoError(t, err)
		eval := func(name string, args [6]uint64) string {
			nr, ok := syscallNumber(name, info)
			require.True(t, ok, name)
			got, err := Evaluate(prog, arch, uint32(nr), args)
			require.NoError(t, err)
			return got
		}
		allowed := 0
		for _, a0 := range families {
			for _, a1 := range types {
				for _, a2 := range protos {
					want := loopSocketWant(a0, a1, a2)
					if want == "allow" {
						allowed++
					}
					assert.Equal(t, want, eval("socket", [6]uint64{a0, a1, a2}), "%s socket(%#x, %#x, %#x)", arch, a0, a1, a2)
				}
			}
			assert.Equal(t, "errno EPERM", eval("socketpair", [6]uint64{a0, unix.SOCK_STREAM, 0}), "%s socketpair(%#x)", arch, a0)
		}
		assert.Equal(t, 2, allowed)
		for _, name := range []string{"bind", "listen", "accept", "accept4", "sendmsg", "recvmsg"} {
			assert.Equal(t, "kill", eval(name, [6]uint64{3}), "%s %s", arch, name)
		}
		for _, name := range []string{"connect", "getsockopt", "setsockopt", "getsockname", "getpeername", "shutdown"} {
			assert.Equal(t, "allow", eval(name, [6]uint64{3}), "%s %s", arch, name)
		}
		assert.Equal(t, "errno EINVAL", eval("prctl", [6]uint64{unix.PR_SET_VMA, 0}), "%s prctl(PR_SET_VMA)", arch)
		assert.Equal(t, "kill", eval("prctl", [6]uint64{unix.PR_SET_NO_NEW_PRIVS}), "%s prctl(other)", arch)
	}
}

// TestAgentLoopSocketsEnforced loads agent-loop.policy in a real child (as
// runc does, and as the bare program) and makes the calls: the loop's TCP
// socket is created, every other family and type answers EPERM.
func TestAgentLoopSocketsEnforced(t *testing.T) {
	policyFile, err := filepath.Abs(AgentLoopName)
	require.NoError(t, err)
	a := nativeInfo(t)
	nr := func(name string) int {
		n, ok := syscallNumber(name, a)
		require.True(t, ok, name)
		return n
	}
	const goFlags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	cases := []struct {
		name    string
		call    string
		args    []uint64
		want    string // stdout prefix; "SIGSYS" for a kill
		success bool   // the call returns a descriptor
	}{
		{"tcp4", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM | goFlags, 0}, "ret ", true},
		{"tcp4 IPPROTO_TCP", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM | goFlags, unix.IPPROTO_TCP}, "ret ", true},
		{"tcp6", "socket", []uint64{unix.AF_INET6, unix.SOCK_STREAM | goFlags, 0}, "errno EPERM\n", false},
		{"udp", "socket", []uint64{unix.AF_INET, unix.SOCK_DGRAM | goFlags, 0}, "errno EPERM\n", false},
		{"raw icmp", "socket", []uint64{unix.AF_INET, unix.SOCK_RAW | goFlags, unix.IPPROTO_ICMP}, "errno EPERM\n", false},
		{"sctp", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM | goFlags, unix.IPPROTO_SCTP}, "errno EPERM\n", false},
		{"packet", "socket", []uint64{unix.AF_PACKET, unix.SOCK_RAW | goFlags, 0x300}, "errno EPERM\n", false},
		{"netlink", "socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW | goFlags, unix.NETLINK_ROUTE}, "errno EPERM\n", false},
		{"vsock", "socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM | goFlags, 0}, "errno EPERM\n", false},
		{"unix", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | goFlags, 0}, "errno EPERM\n", false},
		{"socketpair", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0, 0x7ffffff0}, "errno EPERM\n", false},
		{"prctl PR_SET_VMA", "prctl", []uint64{unix.PR_SET_VMA, 0, 0, 0, 0}, "errno EINVAL\n", false},
		{"bind", "bind", []uint64{0x7ffffff0, 0, 0}, "SIGSYS", false},
		{"listen", "listen", []uint64{0x7ffffff0, 0}, "SIGSYS", false},
	}
	for _, loader := range []string{"runc", "raw"} {
		for _, tc := range cases {
			t.Run(loader+"/"+tc.name, func(t *testing.T) {
				parts := make([]string, len(tc.args))
				for i, v := range tc.args {
					parts[i] = fmt.Sprintf("%#x", v)
				}
				res := runChild(t, "syscall", fmt.Sprintf("%s=%d", childNrEnv, nr(tc.call)), childArgsEnv+"="+strings.Join(parts, ","),
					childPolicyEnv+"="+policyFile, childLoaderEnv+"="+loader)
				if tc.want == "SIGSYS" {
					assert.True(t, res.killedBySIGSYS(), "%s", res)
					return
				}
				require.False(t, res.killedBySIGSYS(), "%s", res)
				assert.True(t, strings.HasPrefix(res.stdout, tc.want), "%s", res)
				assert.Equal(t, tc.success, strings.HasPrefix(res.stdout, "ret "), "%s", res)
			})
		}
	}
}

// TestGoldenAgentLoop is TestGolden for agent-loop.policy: its decision
// table and BPF hashes are reviewed files, rewritten only by -update.
func TestGoldenAgentLoop(t *testing.T) {
	p, err := AgentLoop()
	require.NoError(t, err)
	files := checkGolden(t, p, "testdata/agent-loop.table", "testdata/agent-loop.bpf.sha256")
	// The table has no row where socket falls to the default: every
	// argument case is decided by a reviewed rule.
	assert.NotRegexp(t, `(?m)^\S+\s+socket\s+kill`, files["testdata/agent-loop.table"])
}
