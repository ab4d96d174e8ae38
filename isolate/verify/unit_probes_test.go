package verify

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// testParams are plausible render values for scripts under test.
func testParams() params {
	return params{
		Query: isolate.QueryDir, Repo: isolate.RepoDir, Out: isolate.OutputPath, Tmp: "/tmp",
		Errnos: errnoVocab, Limits: isolate.DefaultLimits(),
		SeedMarker: "seed-marker.txt", SeedValue: "v", SeedEntries: 3, OtherMarker: "other.txt",
		SiblingMarker: "sib.txt", SiblingDir: "sibling-x", PlantToken: "awf-plant-abcdef", Hostname: "host",
		HostOnly: []string{"/etc/shadow"}, HostPrefixes: []string{"/tmp/x"},
		DiskPaths: diskPaths(), HostDisks: [][3]int64{{66053021, 16777216, 4096}},
		TCP4Port: 1, TCP6Port: 2, UDPPort: 3, DNSPort: 4, Abstract: "awf-verify-x",
		FloodBytes: floodBytes, BombCap: bombCapBytes, ThreadCap: bombCapThreads,
		TokenNames: proto.CredentialVariableNames(), TokenPrefixes: proto.CredentialVariablePrefixes(),
		TokenSuffixes: proto.CredentialVariableSuffixes(), DevNames: devNames,
	}
}

func TestBatteryShape(t *testing.T) {
	all := append(Battery(), filterProbe)
	require.GreaterOrEqual(t, len(Battery()), 40, "the issue asks for at least 40 probes")
	groups := map[string]int{}
	seen := map[string]bool{}
	for _, p := range all {
		assert.False(t, seen[p.ID], "duplicate probe %s", p.ID)
		seen[p.ID] = true
		groups[p.Group]++
		assert.NotEmpty(t, p.Title, p.ID)
		assert.NotEmpty(t, p.OnFail, p.ID)
		assert.NotNil(t, p.check, p.ID)
		assert.True(t, p.example != "" || p.exampleKind != "", "%s needs an example answer or kind", p.ID)
	}
	for _, g := range []string{"control", "network", "filesystem", "privilege", "limits"} {
		assert.Greater(t, groups[g], 0, "group %s", g)
	}
	// ctl/plant must run before fs/earlier-invocations looks for its files.
	idx := func(id string) int {
		for i, p := range Battery() {
			if p.ID == id {
				return i
			}
		}
		return -1
	}
	assert.Less(t, idx("ctl/plant"), idx("fs/earlier-invocations"))
}

func TestProbeSchemasAndExamples(t *testing.T) {
	for _, p := range append(Battery(), filterProbe) {
		t.Run(p.ID, func(t *testing.T) {
			s, err := proto.ParseSchema([]byte(p.schema))
			require.NoError(t, err, "schema %s", p.schema)
			if p.example == "" {
				return
			}
			canon, err := s.CheckResult([]byte(p.example))
			require.NoError(t, err, "example %s", p.example)
			c := exampleCtx(t, p, canon)
			st, ev := p.check(c)
			assert.Equal(t, Pass, st, "example must pass: %s", ev)
		})
	}
}

// exampleCtx is the probe context of a run that produced answer.
func exampleCtx(t *testing.T, p Probe, canon []byte) *probeCtx {
	t.Helper()
	fx := &fixture{seedEntries: 3, hostOnlyList: []string{"/etc/shadow"}}
	c := &probeCtx{out: isolate.Outcome{Kind: isolate.KindOK, Output: canon}, limits: p.effectiveLimits(), fx: fx, hits: map[string]int64{}}
	dec := json.NewDecoder(strings.NewReader(string(canon)))
	dec.UseNumber()
	_ = dec.Decode(&c.answer)
	return c
}

// TestScriptsCompile renders every probe and compiles it with the
// interpreter the root filesystem copies, so a syntax error fails here
// rather than as a FAIL inside the sandbox.
func TestScriptsCompile(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, p := range append(Battery(), filterProbe) {
		b, err := p.render(testParams())
		require.NoError(t, err, p.ID)
		assert.Contains(t, string(b), "# probe "+p.ID)
		path := filepath.Join(dir, strings.ReplaceAll(p.ID, "/", "_")+".py")
		require.NoError(t, os.WriteFile(path, b, 0o644), i)
		paths = append(paths, path)
	}
	args := append([]string{"-I", "-S", "-B", "-c", "import sys, ast\nfor p in sys.argv[1:]:\n    ast.parse(open(p).read(), p)"}, paths...)
	out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func TestSelectProbes(t *testing.T) {
	all := Battery()
	assert.Len(t, selectProbes(all, nil), len(all))
	got := selectProbes(all, []string{"net/", "priv/caps"})
	require.NotEmpty(t, got)
	for _, p := range got {
		assert.True(t, strings.HasPrefix(p.ID, "net/") || p.ID == "priv/caps", p.ID)
	}
	assert.Empty(t, selectProbes(all, []string{"net"}), "a prefix must end in /")
	require.NoError(t, checkSelection(all, []string{"net/", "priv/caps", "filter/", "filter/loaded"}))
	assert.Error(t, checkSelection(all, []string{"net"}))
	assert.Error(t, checkSelection(all, []string{"priv/nonexistent"}))
}

func TestJudge(t *testing.T) {
	deny := Probe{ID: "priv/x", Group: "privilege", check: checkAllBlocked("call")}
	ctl := Probe{ID: "ctl/x", Group: "control", check: checkEqual(map[string]any{"ok": true})}
	b := &battery{}
	cases := []struct {
		name string
		p    Probe
		out  isolate.Outcome
		want Status
	}{
		{"kill at an attack step blocks it", deny, isolate.Outcome{Kind: isolate.KindSeccompKill, Signal: "SIGSYS", Stderr: []byte("AWF-STEP unshare\n")}, Pass},
		{"kill before any step proves nothing", deny, isolate.Outcome{Kind: isolate.KindSeccompKill, Stderr: []byte("Traceback\n")}, Fail},
		{"kill in a control probe is a failure", ctl, isolate.Outcome{Kind: isolate.KindSeccompKill, Stderr: []byte("AWF-STEP x\n")}, Fail},
		{"nonzero exit is a failure", deny, isolate.Outcome{Kind: isolate.KindNonzeroExit, Detail: "exit status 1", Stderr: []byte("OSError: boom\n")}, Fail},
		{"timeout is a failure", deny, isolate.Outcome{Kind: isolate.KindTimeout}, Fail},
		{"launch failure is a failure", ctl, isolate.Outcome{Kind: isolate.KindLaunchFailed}, Fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, ev := b.judge(tc.p, &probeCtx{out: tc.out})
			assert.Equal(t, tc.want, st, ev)
		})
	}
}

func TestChecks(t *testing.T) {
	ctx := func(ans map[string]any) *probeCtx { return &probeCtx{answer: ans} }
	st, _ := checkAllBlocked("a", "b")(ctx(map[string]any{"a": "EPERM", "b": "ok"}))
	assert.Equal(t, Fail, st)
	st, _ = checkAllBlocked("a")(ctx(map[string]any{"a": "EROFS"}))
	assert.Equal(t, Pass, st)
	st, _ = checkAnyBlocked("a", "b")(ctx(map[string]any{"a": "ok", "b": "EPERM"}))
	assert.Equal(t, Pass, st)
	st, _ = checkAnyBlocked("a", "b")(ctx(map[string]any{"a": "ok", "b": "ok"}))
	assert.Equal(t, Fail, st)
	// ESRCH from ptrace means the call reached the kernel.
	st, _ = checkDenied("ptrace")(ctx(map[string]any{"ptrace": "ESRCH"}))
	assert.Equal(t, Fail, st)
	st, _ = checkDenied("ptrace")(ctx(map[string]any{"ptrace": "EPERM"}))
	assert.Equal(t, Pass, st)
	// A listener hit fails even when the script claims otherwise.
	c := ctx(map[string]any{"socket": "ok", "connect": "ECONNREFUSED"})
	c.hits = map[string]int64{"tcp4": 1}
	st, _ = checkListener("tcp4", "socket", "connect")(c)
	assert.Equal(t, Fail, st)
}

func TestPy(t *testing.T) {
	for in, want := range map[any]string{true: "True", false: "False", 3: "3", "a\"b": `"a\"b"`} {
		got, err := py(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	got, err := py([]string{"x", "y"})
	require.NoError(t, err)
	assert.Equal(t, `["x","y"]`, got)
}

// TestEveryScriptFileIsAProbe checks that each file under probes/ is the
// script of a probe that has no body built in Go, and that each such probe
// has its file: a reviewer who reads probes/ reads exactly what runs.
func TestEveryScriptFileIsAProbe(t *testing.T) {
	want := map[string]bool{}
	for _, p := range append(append(Battery(), filterProbe), ConfiguredProbes(isolate.DefaultLimits())...) {
		if p.body == "" {
			want["probes/"+p.ID+".py"] = true
		}
	}
	got := map[string]bool{}
	require.NoError(t, fs.WalkDir(probeScripts, "probes", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got[p] = true
		}
		return err
	}))
	assert.Equal(t, want, got)
	assert.Greater(t, len(got), 50, "the probes' scripts are files")
}
