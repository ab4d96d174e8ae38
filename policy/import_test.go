package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dockerDefault is moby's default seccomp profile (testdata/README.md).
const dockerDefault = "testdata/docker-default.json"

func loadDockerDefault(t *testing.T) *Imported {
	t.Helper()
	raw, err := os.ReadFile(dockerDefault)
	require.NoError(t, err)
	require.Equal(t, FormatDocker, DetectFormat(raw))
	im, err := Import(dockerDefault, raw)
	require.NoError(t, err)
	return im
}

// draftRules are the draft's rule lines (not comments, header or groups).
func draftRules(draft string) []string {
	var out []string
	for _, l := range strings.Split(draft, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && (f[0] == "allow" || f[0] == "kill" || f[0] == "errno") {
			out = append(out, l)
		}
	}
	return out
}

// TestImportDockerDefault: the draft of Docker's default profile marks every
// rule "reason needed" (lint refuses each), states its assumption, and says
// where each capability, architecture and kernel condition went.
func TestImportDockerDefault(t *testing.T) {
	im := loadDockerDefault(t)
	assert.Equal(t, []string{"x86_64", "aarch64"}, im.Arches)
	d := im.Draft()
	for _, want := range []string{
		"includes/excludes resolved for: " + ImportAssumption,
		"default errno EPERM : reason needed",
		"# dropped: sub-architectures SCMP_ARCH_X86, SCMP_ARCH_X32 of SCMP_ARCH_X86_64",
		"# dropped: architectures SCMP_ARCH_MIPS64",
		"# dropped: needs capabilities CAP_SYS_ADMIN (assumed none)",
		"# assumed: the kernel is at least 4.8, so the rule applies",
		"# assumed: excluded for capabilities CAP_SYS_ADMIN, which the sandbox does not hold, so the rule applies",
		"allow ptrace : reason needed",
		"allow socket if arg0 < 0x26 : reason needed",
		"allow personality if arg0 == 0xffffffff : reason needed",
		"allow clone if arg0 & 0x7e020000 == 0x0 : reason needed",
		"errno ENOSYS clone3 : reason needed",
		"arch x86_64 aarch64",
	} {
		assert.Contains(t, d, want)
	}
	assert.NotContains(t, d, "allow mount :", "mount needs CAP_SYS_ADMIN")
	assert.NotContains(t, d, "allow bpf :", "bpf needs CAP_SYS_ADMIN or CAP_BPF")
	rules := draftRules(d)
	require.Greater(t, len(rules), 300)
	for _, r := range rules {
		assert.True(t, strings.HasSuffix(r, " : "+ReasonNeeded), r)
	}
	needed := 0
	defaultLine := 1 + strings.Count(d[:strings.Index(d, "default errno EPERM")], "\n")
	for _, f := range Lint("draft.policy", []byte(d)) {
		if strings.Contains(f.Msg, "imported default action") {
			assert.Equal(t, defaultLine, f.Line, f.String())
		}
		if strings.Contains(f.Msg, "reason needed") {
			assert.Equal(t, SevError, f.Severity)
			needed++
		}
	}
	assert.Equal(t, len(rules)+1, needed, "one 'reason needed' error per rule and for the default")
	// Lint tells the reviewer what Docker's default lets a container do.
	var warnings []string
	for _, f := range Lint("draft.policy", []byte(d)) {
		if f.Severity == SevWarning {
			warnings = append(warnings, f.Msg)
		}
	}
	joined := strings.Join(warnings, "\n")
	for _, w := range []string{"allows ioctl TIOCSTI:", "allows ioctl TIOCLINUX:", "allows ioctl TIOCSETD:", "allows ptrace:",
		"allows process_vm_writev:", "allows name_to_handle_at:", "allows personality 0x0, not only the query",
		"allows socket family AF_INET beyond AF_UNIX", "allows socketpair family AF_INET beyond AF_UNIX"} {
		assert.Contains(t, joined, w)
	}
	assert.NotContains(t, joined, "allows clone with namespace flags", "Docker's clone rule clears every CLONE_NEW* flag")
}

// TestDiffPython3AgainstDockerDefault is the reviewed comparison in
// docs/policy.md: awf allows nothing Docker's default denies, both
// restrict clone (awf's condition implies Docker's), and the calls Docker
// allows that awf denies include the ones the docs name.
func TestDiffPython3AgainstDockerDefault(t *testing.T) {
	im := loadDockerDefault(t)
	p, err := Default()
	require.NoError(t, err)
	// awf's calls that are allowed only under conditions which Docker
	// allows whole: each is narrower in awf (docs/policy.md says why).
	narrower := map[string]bool{"fcntl": true, "ioctl": true, "madvise": true, "mmap": true, "preadv2": true, "prlimit64": true, "pwritev2": true}
	docAwf, docDocker := reviewedComparison(t)
	sort.Strings(docAwf)
	assert.Equal(t, docAwf, sortedKeys(map[string]bool{"clone": true, "fcntl": true, "ioctl": true, "madvise": true, "mmap": true, "preadv2": true, "prlimit64": true, "pwritev2": true}), "docs/policy.md's table of calls both allow")
	allDockerOnly := map[string]bool{}
	counts := map[string]int{}
	for _, arch := range p.Arches {
		t.Run(arch, func(t *testing.T) {
			at, err := p.Table(arch)
			require.NoError(t, err)
			dt, err := im.Table(arch)
			require.NoError(t, err)
			assert.Equal(t, "errno EPERM", dt.Default)
			lines := Diff(at, dt)
			require.NotEmpty(t, lines)
			for _, l := range []string{
				"- kill ptrace (" + arch + ") : " + reasonOf(p, "ptrace", ActKill),
				"+ allow ptrace (" + arch + ") : reason needed (syscalls[1])",
				"+ allow personality if arg0 == 0xffffffff (" + arch + ") : reason needed (syscalls[9])",
			} {
				if strings.HasPrefix(l, "- kill ptrace") {
					l = strings.TrimSuffix(l, " : ")
				}
				assert.Contains(t, lines, l)
			}
			var awfOnly, dockerOnly []string
			for _, c := range Contrasts(at, dt) {
				switch {
				case c.A.Permits() && !c.B.Permits():
					awfOnly = append(awfOnly, c.String())
				case c.B.Permits() && !c.A.Permits():
					dockerOnly = append(dockerOnly, c.Syscall)
				case c.Syscall == "clone":
					assert.Equal(t, VerdictConditional, c.A)
					assert.Equal(t, VerdictConditional, c.B)
				default:
					assert.True(t, narrower[c.Syscall], "%s: both allow it, awf under conditions Docker does not have: %s", arch, c)
					assert.Equal(t, VerdictConditional, c.A, c.String())
					assert.Equal(t, VerdictAllow, c.B, c.String())
				}
			}
			assert.Empty(t, awfOnly, "awf allows what Docker's default denies; justify each in docs/policy.md")
			for _, n := range []string{"ptrace", "process_vm_readv", "socket", "socketpair", "personality", "pipe2", "io_setup", "memfd_create", "setuid", "name_to_handle_at", "inotify_init1", "fadvise64", "cachestat"} {
				assert.Contains(t, dockerOnly, n)
			}
			t.Logf("%s: Docker allows %d calls (wholly or in part) that awf denies", arch, len(dockerOnly))
			counts[arch] = len(dockerOnly)
			for _, n := range dockerOnly {
				allDockerOnly[n] = true
			}

			// awf's clone condition implies Docker's: every clone awf lets
			// through, Docker lets through.
			ap, err := p.BPF(arch)
			require.NoError(t, err)
			dp, err := im.perArch[arch].BPF(arch)
			require.NoError(t, err)
			nr, ok := syscallNumber("clone", mustArch(t, arch))
			require.True(t, ok)
			for _, flags := range []uint64{0x3d0f00, 0x10100, 0x10100 | 0x20000, 0x10100 | 0x10000000, 0x11} {
				a, err := Evaluate(ap, arch, uint32(nr), [6]uint64{flags})
				require.NoError(t, err)
				d, err := Evaluate(dp, arch, uint32(nr), [6]uint64{flags})
				require.NoError(t, err)
				if a == "allow" {
					assert.Equal(t, "allow", d, "clone flags %#x", flags)
				}
			}
		})
	}
	assert.Equal(t, sortedKeys(allDockerOnly), docDocker, "docs/policy.md lists exactly the calls Docker allows and awf denies")
	raw, err := os.ReadFile("../docs/policy.md")
	require.NoError(t, err)
	assert.Contains(t, string(raw), fmt.Sprintf("%d system calls on x86_64 and %d on aarch64", counts["x86_64"], counts["aarch64"]))
}

// reviewedComparison reads docs/policy.md's comparison with Docker: the
// calls in the table of what both allow (first column) and every name in
// the groups of what only Docker allows.
func reviewedComparison(t *testing.T) (both, dockerOnly []string) {
	t.Helper()
	raw, err := os.ReadFile("../docs/policy.md")
	require.NoError(t, err)
	doc := string(raw)
	section := func(start, end string) string {
		i := strings.Index(doc, start)
		require.GreaterOrEqual(t, i, 0, start)
		j := strings.Index(doc[i:], end)
		require.GreaterOrEqual(t, j, 0, end)
		return doc[i : i+j]
	}
	names := func(s string) []string {
		var out []string
		parts := strings.Split(s, "`")
		for i := 1; i < len(parts); i += 2 {
			out = append(out, parts[i])
		}
		return out
	}
	for _, l := range strings.Split(section("### What awf allows that Docker's default denies", "Both profiles answer"), "\n") {
		if strings.HasPrefix(l, "| `") {
			both = append(both, names(strings.Split(l, "|")[1])...)
		}
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(section("### What Docker's default allows that awf denies", "Outside the tables"), "\n") {
		if !strings.HasPrefix(l, "- **") {
			continue
		}
		l, _, _ = strings.Cut(l, "; x86_64 only:")
		_, list, _ := strings.Cut(l, "): ")
		for _, n := range names(list) {
			if !seen[n] {
				seen[n] = true
				dockerOnly = append(dockerOnly, n)
			}
		}
	}
	sort.Strings(dockerOnly)
	return both, dockerOnly
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func reasonOf(p *Policy, syscall string, kind ActionKind) string {
	for _, r := range p.Rules {
		if r.Syscall == syscall && r.Action.Kind == kind {
			return r.Reason
		}
	}
	return ""
}

// TestExportImportRoundTrip: the Docker export, read back, has the same
// decision table on every arch, both as imported and as the parsed draft.
func TestExportImportRoundTrip(t *testing.T) {
	for _, src := range []struct{ name, text string }{
		{"python3", string(DefaultSource())},
		{"errno default", "version 1\ndefault errno EACCES : learn mode\narch x86_64 aarch64\ngroup g : g\nallow read : reading\nallow arch_prctl : x86 only\nkill ptrace : never\n"},
	} {
		t.Run(src.name, func(t *testing.T) {
			p, err := Parse(src.name, []byte(src.text))
			require.NoError(t, err)
			raw, err := p.DockerJSON()
			require.NoError(t, err)
			var shape map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(raw, &shape))
			assert.Contains(t, shape, "archMap")
			assert.NotContains(t, shape, "architectures", "Docker refuses architectures next to archMap")
			if p.DefaultAction.Kind == ActErrno {
				assert.JSONEq(t, "13", string(shape["defaultErrnoRet"]))
			}
			require.Equal(t, FormatDocker, DetectFormat(raw))
			im, err := Import("export.json", raw)
			require.NoError(t, err)
			assert.Equal(t, p.Arches, im.Arches)
			draft, err := Parse("draft.policy", []byte(im.Draft()))
			require.NoError(t, err, "the draft of an awf export parses:\n%s", im.Draft())
			for _, arch := range p.Arches {
				want, err := p.Table(arch)
				require.NoError(t, err)
				got, err := im.Table(arch)
				require.NoError(t, err)
				assert.Empty(t, Diff(want, got), arch)
				assert.Equal(t, want.ENOSYSFrom, got.ENOSYSFrom, arch)
				fromDraft, err := draft.Table(arch)
				require.NoError(t, err)
				assert.Empty(t, Diff(want, fromDraft), arch)
				assert.Equal(t, want.ENOSYSFrom, fromDraft.ENOSYSFrom, arch)
			}
		})
	}
}

// TestImportOCI: the OCI section awf exports (bare, and inside a
// config.json) imports to the same table on the host arch.
func TestImportOCI(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	sec, err := p.OCI()
	require.NoError(t, err)
	bare, err := json.Marshal(sec)
	require.NoError(t, err)
	config, err := json.Marshal(map[string]any{"ociVersion": "1.2.0", "process": map[string]any{"args": []string{"python3"}}, "linux": map[string]any{"seccomp": sec}})
	require.NoError(t, err)
	arch := nativeInfo(t).name
	want, err := p.Table(arch)
	require.NoError(t, err)
	for name, raw := range map[string][]byte{"bare": bare, "config.json": config} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, FormatOCI, DetectFormat(raw))
			im, err := Import(name, raw)
			require.NoError(t, err)
			assert.Equal(t, FormatOCI, im.Format)
			assert.Equal(t, []string{arch}, im.Arches)
			got, err := im.Table(arch)
			require.NoError(t, err)
			assert.Empty(t, Diff(want, got))
		})
	}
}

// TestImportTranslatesConditionsAndFilters: each comparison operator, runc's
// OR for repeated indexes, and includes/excludes under the assumption.
func TestImportTranslatesConditionsAndFilters(t *testing.T) {
	prof := `{"defaultAction": "SCMP_ACT_KILL_PROCESS", "archMap": [
	  {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []},
	  {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": null}],
	 "syscalls": [
	  {"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]},
	  {"names": ["write"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_NE"}, {"index": 2, "value": 4096, "op": "SCMP_CMP_LT"}]},
	  {"names": ["lseek"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 2, "value": 2, "op": "SCMP_CMP_LE"}]},
	  {"names": ["dup"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 2, "op": "SCMP_CMP_GT"}]},
	  {"names": ["close"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 3, "op": "SCMP_CMP_GE"}]},
	  {"names": ["madvise"], "action": "SCMP_ACT_ERRNO", "errnoRet": 22, "args": [{"index": 2, "value": 255, "valueTwo": 3, "op": "SCMP_CMP_MASKED_EQ"}]},
	  {"names": ["getpid"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}, {"index": 0, "value": 2, "op": "SCMP_CMP_EQ"}]},
	  {"names": ["getuid"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64"]}},
	  {"names": ["getgid"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": ["amd64"]}},
	  {"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
	  {"names": ["getppid"], "action": "SCMP_ACT_LOG"},
	  {"names": ["no_such_call"], "action": "SCMP_ACT_ALLOW", "comment": "gone"}
	 ]}`
	im, err := Import("t.json", []byte(prof))
	require.NoError(t, err)
	d := im.Draft()
	for _, want := range []string{
		"allow read if arg0 == 0x1 : reason needed",
		"allow write if arg0 != 0x1 && arg2 < 0x1000 : reason needed",
		"allow lseek if arg2 <= 0x2 : reason needed",
		"allow dup if arg0 > 0x2 : reason needed",
		"allow close if arg0 >= 0x3 : reason needed",
		"errno EINVAL madvise if arg2 & 0xff == 0x3 : reason needed",
		"# assumed: an index is compared more than once, so, as runc does, each comparison is a rule of its own (ORed)",
		"allow getpid if arg0 == 0x1 : reason needed\nallow getpid if arg0 == 0x2 : reason needed",
		"# assumed: getuid applies on x86_64 only in the profile",
		"# assumed: getgid applies on aarch64 only in the profile",
		"# dropped: needs capabilities CAP_SYS_ADMIN (assumed none)",
		"# assumed: SCMP_ACT_LOG logs and allows; the draft allows",
		"# dropped: no_such_call: libseccomp",
		"group syscalls-11 : imported from syscalls[11] (SCMP_ACT_ALLOW, gone)",
	} {
		assert.Contains(t, d, want)
	}
	verdict := func(arch, name string) string {
		tb, err := im.Table(arch)
		require.NoError(t, err)
		var acts []string
		for _, r := range tb.Rows {
			if r.Syscall == name {
				acts = append(acts, r.Action)
			}
		}
		return strings.Join(acts, ",")
	}
	assert.Equal(t, "allow", verdict("x86_64", "getuid"))
	assert.Equal(t, "kill", verdict("aarch64", "getuid"))
	assert.Equal(t, "kill", verdict("x86_64", "getgid"))
	assert.Equal(t, "allow", verdict("aarch64", "getgid"))
	assert.Equal(t, "kill", verdict("x86_64", "mount"))
	assert.True(t, strings.HasPrefix(verdict("x86_64", "getpid"), "allow,allow,kill"), verdict("x86_64", "getpid"))
}

// TestImportIsStrict: unknown fields, duplicate keys and untranslatable
// elements are refused with the reason.
func TestImportIsStrict(t *testing.T) {
	const ok = `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "comment": "x"}]}`
	_, err := Import("ok.json", []byte(ok))
	require.NoError(t, err)
	cases := []struct{ name, doc, want string }{
		{"unknown top field", `{"defaultAction": "SCMP_ACT_ERRNO", "archMap": [], "colour": 1, "syscalls": []}`, `unknown field "colour"`},
		{"unknown syscall field", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "comment": "", "why": "x"}]}`, `unknown field "why"`},
		{"unknown oci field", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "why": "x"}]}`, `unknown field "why"`},
		{"duplicate top key", `{"defaultAction": "SCMP_ACT_ALLOW", "defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}`, `duplicate key "defaultAction" in $`},
		{"duplicate nested key", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "op": "SCMP_CMP_EQ", "value": 1, "value": 2}]}]}`, `duplicate key "value" in $.syscalls[0].args[0]`},
		{"duplicate in oci config", `{"ociVersion": "1.0", "ociVersion": "1.1", "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}}}`, `duplicate key "ociVersion"`},
		{"config without seccomp", `{"ociVersion": "1.0", "linux": {}}`, "no linux.seccomp section"},
		{"trailing data", ok + ` {}`, "trailing data"},
		{"bad op", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_ABOUT"}]}]}`, `unknown comparison "SCMP_CMP_ABOUT"`},
		{"bad index", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]}`, "argument index 6"},
		{"notify", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}]}`, "cannot be imported"},
		{"errnoRet on allow", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}]}`, "errnoRet with action SCMP_ACT_ALLOW"},
		{"both arch forms", `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []}], "syscalls": []}`, "both architectures and archMap"},
		{"foreign arches only", `{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_S390X"], "syscalls": []}`, "neither x86_64 nor aarch64"},
		{"no names", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"action": "SCMP_ACT_ALLOW", "comment": ""}]}`, "syscalls[0]: no names"},
		{"bad name", `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["Read!"], "action": "SCMP_ACT_ALLOW"}]}`, "not a system call name"},
		{"not json", `{"defaultAction": `, "unexpected EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(tc.name, []byte(tc.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
