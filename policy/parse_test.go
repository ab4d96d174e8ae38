package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// header is a valid header; tests append rules after it (rules start on line 5).
const header = "version 3\ndefault kill : unknown calls are fatal\narch x86_64\ngroup g : a group\n"

func TestParseDefaultPolicy(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	assert.Equal(t, 2, p.Version)
	assert.Equal(t, Action{Kind: ActKill}, p.DefaultAction)
	assert.Equal(t, []string{"x86_64", "aarch64"}, p.Arches)
	assert.Greater(t, len(p.Rules), 200)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, p.Digest())
	for _, r := range p.Rules {
		assert.NotEmpty(t, r.Reason, "line %d", r.Line)
		assert.NotEmpty(t, r.Group, "line %d", r.Line)
	}
}

func TestParseRules(t *testing.T) {
	cases := []struct {
		line string
		want Rule
	}{
		{"allow read : read files", Rule{Action: Action{Kind: ActAllow}, Syscall: "read", Reason: "read files"}},
		{"kill ptrace     : other processes: never", Rule{Action: Action{Kind: ActKill}, Syscall: "ptrace", Reason: "other processes: never"}},
		{"errno ENOSYS clone3 : fall back", Rule{Action: Action{Kind: ActErrno, Errno: unix.ENOSYS}, Syscall: "clone3", Reason: "fall back"}},
		{"allow socket if arg0 == AF_UNIX +sensitive : unix only", Rule{Action: Action{Kind: ActAllow}, Syscall: "socket",
			Conds: []Cond{{Arg: 0, Op: OpEq, Values: []uint64{1}, Names: []string{"AF_UNIX"}}}, Sensitive: true, Reason: "unix only"}},
		{"allow clone if arg0&0x7e030100==CLONE_VM|CLONE_THREAD +sensitive : threads", Rule{Action: Action{Kind: ActAllow}, Syscall: "clone",
			Conds: []Cond{{Arg: 0, HasMask: true, Mask: 0x7e030100, Op: OpEq, Values: []uint64{0x10100}, Names: []string{"CLONE_VM|CLONE_THREAD"}}}, Sensitive: true, Reason: "threads"}},
		{"allow ioctl if arg1 & 0xffffffff in {TCGETS, 0x541b} +sensitive : tty", Rule{Action: Action{Kind: ActAllow}, Syscall: "ioctl",
			Conds: []Cond{{Arg: 1, HasMask: true, Mask: 0xffffffff, Op: OpEq, Values: []uint64{0x5401, 0x541b}, Names: []string{"TCGETS", ""}}}, Sensitive: true, Reason: "tty"}},
		{"allow mmap if arg2 <= 3 && arg3 != 0x20 : two args", Rule{Action: Action{Kind: ActAllow}, Syscall: "mmap",
			Conds: []Cond{{Arg: 2, Op: OpLe, Values: []uint64{3}, Names: []string{""}}, {Arg: 3, Op: OpNe, Values: []uint64{0x20}, Names: []string{""}}}, Reason: "two args"}},
		{"allow read # trailing comment : not a reason\n", Rule{}}, // reason is inside the comment
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			p, err := Parse("t.policy", []byte(header+tc.line))
			if tc.want.Syscall == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Len(t, p.Rules, 1)
			got := p.Rules[0]
			tc.want.Line, tc.want.Group = 5, "g"
			tc.want.Col = strings.Index(tc.line, tc.want.Syscall) + 1
			assert.Equal(t, tc.want, got)
			// The canonical form parses back to the same rule.
			q, err := Parse("c.policy", []byte(p.Canonical()))
			require.NoError(t, err)
			assert.Equal(t, p.Digest(), q.Digest())
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown syscall", header + "allow frobnicate : x", "t.policy:5:7: unknown system call \"frobnicate\""},
		{"missing reason", header + "allow read", "t.policy:5:11: missing reason"},
		{"empty reason", header + "allow read :   ", "t.policy:5:12: missing reason after ':'"},
		{"unknown action", header + "permit read : x", "t.policy:5:1: unknown directive or action \"permit\""},
		{"unknown errno", header + "errno EFOO read : x", "t.policy:5:7: unknown errno \"EFOO\""},
		{"bad char", header + "allow read; : x", "t.policy:5:11: unexpected character ';'"},
		{"unknown constant", header + "allow socket if arg0 == AF_FOO +sensitive : x", "t.policy:5:25: unknown constant \"AF_FOO\""},
		{"bad arg", header + "allow read if arg6 == 1 : x", "t.policy:5:15: expected arg0..arg5"},
		{"bad op", header + "allow read if arg0 = 1 : x", "t.policy:5:20: unexpected character '='"},
		{"mask with lt", header + "allow read if arg0 & 3 < 1 : x", "t.policy:5:24: a masked comparison must use == or in"},
		{"value outside mask", header + "allow read if arg0 & 3 == 4 : x", "can never match"},
		{"same arg twice", header + "allow read if arg0 == 1 && arg0 == 2 : x", "arg0 is compared twice"},
		{"unterminated list", header + "allow read if arg0 in {1, 2 : x", "unterminated list"},
		{"trailing junk", header + "allow read extra : x", "t.policy:5:12: unexpected \"extra\""},
		{"duplicate", header + "allow read : x\nallow read : y", "t.policy:6:7: duplicate rule for read (first on line 5)"},
		{"uncond and cond", header + "allow read : x\nallow read if arg0 == 1 : y", "has both an unconditional rule"},
		{"overlapping actions", header + "allow fcntl if arg1 in {1, 2} : x\nerrno EPERM fcntl if arg1 == 2 : y", "value 0x2 has two actions"},
		{"overlapping ranges", header + "allow madvise if arg2 in {1, 2} : x\nerrno EPERM madvise if arg2 > 1 : y", "madvise values 0x2..0x2 of arg2 have two actions (lines 5 and 6)"},
		{"overlapping ne", header + "allow preadv2 if arg5 != 0 : x\nerrno EPERM preadv2 if arg5 >= 8 : y", "preadv2 values 0x8..0xffffffffffffffff of arg5 have two actions"},
		{"ranges on two args", header + "allow preadv2 if arg5 == 0 : x\nerrno EPERM preadv2 if arg4 != 0 : y", "not simple equalities on one argument"},
		{"range against a mask", header + "allow madvise if arg2 & 0xff == 1 : x\nerrno EPERM madvise if arg2 > 1 : y", "not simple equalities on one argument"},
		{"never allowed", header + "allow mount : x", "mount may never be allowed (mounts)"},
		{"clone3 never", header + "allow clone3 : x", "clone3 may never be allowed"},
		{"socket unconditional", header + "allow socket +sensitive : x", "socket may only be allowed with arg0 == AF_UNIX"},
		{"socket inet", header + "allow socket if arg0 == AF_INET +sensitive : x", "socket may only be allowed with arg0 == AF_UNIX"},
		{"socket narrow mask", header + "allow socket if arg0 & 1 == AF_UNIX +sensitive : x", "a mask must keep all 32 low bits"},
		{"clone unconditional", header + "allow clone +sensitive : x", "clone may only be allowed with arg0 & MASK"},
		{"clone ns allowed", header + "allow clone if arg0 & 0x7e030100 == 0x10010100 +sensitive : x", "every CLONE_NEW* flag clear"},
		{"default allow", "version 1\ndefault allow : x\narch x86_64\n", "t.policy:2:9: default allow is not a sandbox"},
		{"missing header", "group g : x\nallow read : x\n", "missing header line: version N"},
		{"rule outside group", "version 1\ndefault kill : x\narch x86_64\nallow read : x\n", "rule outside any group"},
		{"unknown arch", "version 1\ndefault kill : x\narch sparc\n", "t.policy:3:6: unknown architecture \"sparc\""},
		{"duplicate arch", "version 1\ndefault kill : x\narch x86_64 amd64\n", "architecture x86_64 listed twice"},
		{"bad version", "version one\n", "t.policy:1:9: version \"one\" is not a positive integer"},
		{"not utf8", "version 1\n\xff\n", "not valid UTF-8"},
		{"column counts characters", header + "allow read : é\nallow é : x", "t.policy:6:7: unexpected character 'é'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.policy", []byte(tc.src))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var pes ParseErrors
			require.True(t, errors.As(err, &pes))
			for _, pe := range pes {
				assert.Positive(t, pe.Line)
				assert.Positive(t, pe.Col)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	_, err := Parse("t.policy", []byte(header+"allow nope1 : x\nallow nope2 : y\npermit read : z\n"))
	require.Error(t, err)
	assert.Len(t, strings.Split(err.Error(), "\n"), 3)
}

func TestCanonicalIgnoresCommentsAndSpacing(t *testing.T) {
	a, err := Parse("a", []byte(header+"allow read : read files\n"))
	require.NoError(t, err)
	b, err := Parse("b", []byte("# comment\n"+strings.ReplaceAll(header, " ", "   ")+"  allow   read   :   read files   # why\n"))
	require.NoError(t, err)
	assert.Equal(t, a.Digest(), b.Digest())
	c, err := Parse("c", []byte(header+"allow read : read other files\n"))
	require.NoError(t, err)
	assert.NotEqual(t, a.Digest(), c.Digest())
}
