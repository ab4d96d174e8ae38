package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/tests/fixture"
)

// Sealed probes end to end: the seed's CLI and script contract through awf
// run, on each real runtime, with the seed's "Failure closure" list checked
// byte for byte. docs/sealed-probes.md maps the seed's required tests here.

const probeErrLine = `{"result":"ERROR"}`

// probeRepo is one sealedProbes.privateRepos object.
type probeRepo struct {
	Repo   string `json:"repo"`
	Source string `json:"source,omitempty"`
}

// sp is the sealedProbes block of a test config.
type sp struct {
	Enabled        bool        `json:"enabled"`
	PrivateRepos   []probeRepo `json:"privateRepos"`
	Runtime        string      `json:"runtime,omitempty"`
	Timeout        int         `json:"timeout,omitempty"`
	MemoryLimit    string      `json:"memoryLimit,omitempty"`
	MaxInvocations int         `json:"maxInvocations,omitempty"`
}

// writeProbeConfig writes a config with bounded queries on demo/app and the
// given sealedProbes block (nil: absent).
func writeProbeConfig(t *testing.T, b bq, p *sp) string {
	t.Helper()
	if b.PrivateRepos == nil {
		b.PrivateRepos = []repo{local("demo/app", "internal")}
	}
	doc := map[string]any{"boundedQueries": enabled(b), "agent": map[string]any{"user": agentUser}}
	if p != nil {
		doc["sealedProbes"] = p
	}
	return writeDoc(t, doc)
}

// probeFixture is a second local repository, B, with a marker that repo A's
// probes look for.
var (
	probeFixtureOnce sync.Once
	probeFixtureDir  string
	probeFixtureErr  error
)

const markerB = "marker-of-repo-b-7f3a"

func repoB(t *testing.T) string {
	t.Helper()
	probeFixtureOnce.Do(func() {
		probeFixtureDir = filepath.Join(filepath.Dir(repoDir), "repo-b")
		probeFixtureErr = fixture.MakeRepo(probeFixtureDir, "e2e", map[string]string{"B.txt": markerB + "\n", "README.md": "# b\n"})
	})
	require.NoError(t, probeFixtureErr)
	return probeFixtureDir
}

// pHelper runs the real CLI and prints "NAME rc=<status> stderr=<bytes> <line>".
var pHelper = cliHelper("p", "sealed-probe") + `O3='--outcome YES --outcome NO --outcome UNKNOWN'
`

// The probe scripts. Each answers YES when what it checks holds.
const (
	// Reads and modifies its copy: edits README, adds a file, commits.
	probeModify = `import json, os, subprocess
from pathlib import Path
repo = Path("/probe/repo")
ok = (repo / "SECURITY.md").is_file() and (repo / "README.md").read_text() == "# demo\n"
(repo / "README.md").write_text("changed\n")
(repo / "NEW").write_text("x")
os.remove(repo / "LICENSE")
ok = ok and (repo / "README.md").read_text() == "changed\n" and not (repo / "LICENSE").exists()
Path("/probe/out").write_text(json.dumps({"result": "YES" if ok else "NO"}))
`
	// A later probe sees none of that, and it sees only its own
	// repository and the fixed root: no other seed, seed parent, earlier
	// invocation, broker state, workspace, socket, credential or network.
	probeIsolation = `import json, os, socket
from pathlib import Path
bad = []
repo = Path("/probe/repo")
if (repo / "README.md").read_text() != "# demo\n" or (repo / "NEW").exists() or not (repo / "LICENSE").is_file():
    bad.append("an earlier probe's changes are visible")
if sorted(os.listdir("/probe")) != ["repo"]: bad.append("probe dir")
if os.getuid() != 65534: bad.append("uid")
for k in os.environ:
    if "TOKEN" in k or k.startswith("AWF_") or k.startswith("GH_") or k.startswith("GITHUB_"): bad.append("env " + k)
for p in ["/run/awf-ingress", "/var/lib/awf", "/var/run/docker.sock", "/run/docker.sock", "/run/awf-test-docker", "/home", "/root", "/work"]:
    if os.path.exists(p): bad.append(p)
for top, dirs, files in os.walk("/", followlinks=False):
    if top.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    for f in files:
        fp = os.path.join(top, f)
        try:
            with open(fp, "rb") as h:
                if b"MARKER" in h.read(1 << 20): bad.append("marker " + fp)
        except OSError:
            pass
        if f.endswith(".sock"): bad.append("name " + fp)
for fam, addr in [(socket.AF_INET, ("127.0.0.1", PORT)), (socket.AF_INET6, ("::1", PORT))]:
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(addr)
        bad.append("connected %s" % (addr,))
    except OSError:
        pass
try:
    socket.getaddrinfo("example.com", 443)
    bad.append("dns")
except OSError:
    pass
Path("/probe/out").write_text(json.dumps({"result": "YES" if not bad else "NO"}))
`
)

// probeScript replaces MARKER in a script by repo B's marker without the
// script itself containing it (the script file is in the sandbox too).
func probeScript(s string, port int) string {
	s = strings.ReplaceAll(s, `b"MARKER"`, `("marker-of-repo-" + "b-7f3a").encode()`)
	return strings.ReplaceAll(s, "PORT", fmt.Sprint(port))
}

// loopbackListener is a host service on loopback that no probe may reach;
// it records every connection.
func loopbackListener(t *testing.T) (int, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// writeAgentFiles writes probe scripts where the agent can read them.
func writeAgentFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "awf-e2e-probe-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

// probeAudit reads the archived sealed-probe audit log named in awf's stderr.
func probeAudit(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	return jsonLines(t, archivedLog(t, stderr, "sealed-probe.jsonl"))
}

// TestProbeContractPerRuntime runs the seed's workflow unchanged on every
// real runtime: the probe reads and modifies its writable copy, a later
// probe sees the seed unchanged, and a probe on repo A sees nothing of
// repo B, the host, the broker, the sockets, credentials or the network.
func TestProbeContractPerRuntime(t *testing.T) {
	for _, rt := range []string{"direct", "gvisor", "docker"} {
		t.Run(rt, func(t *testing.T) {
			sock := fixture.RequireRuntime(t, rt)
			before := runDirs()
			port, conns := loopbackListener(t)
			dir := writeAgentFiles(t, map[string]string{
				"modify.py": probeModify, "isolation.py": probeScript(probeIsolation, port),
			})
			cfg := writeProbeConfig(t, bq{DockerSocket: sock}, &sp{Enabled: true, Runtime: rt,
				PrivateRepos: []probeRepo{{Repo: "demo/a", Source: repoDir}, {Repo: "demo/b", Source: repoB(t)}}})
			// The seed installs the CLI at /usr/local/bin/sealed-probe: a
			// workflow may call that path as well as the name.
			r := awfRun(t, cfg, agentScript(t, pHelper+cliHelper("pabs", "/usr/local/bin/sealed-probe")+fmt.Sprintf(`
p modify --repo demo/a $O3 < %[1]s/modify.py
p isolation --repo demo/a $O3 < %[1]s/isolation.py
pabs seed-path --repo demo/a $O3 < %[1]s/modify.py
echo "host-tools $(ls /usr/local/bin | tr '\n' ' ')"
`, dir)), "GH_TOKEN=ghp_e2estagingtokennevervisible0000000000")
			require.Equal(t, 0, r.code, r.stderr)
			got := lines(r.stdout)
			for _, name := range []string{"modify", "isolation", "seed-path"} {
				assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got[name], name)
			}
			// The host's own tools stay beside the CLI, in the agent's view.
			seen := strings.Fields(got["host-tools"])
			assert.Contains(t, seen, "sealed-probe")
			hostBin, err := os.ReadDir("/usr/local/bin")
			require.NoError(t, err)
			for _, e := range hostBin {
				assert.Contains(t, seen, e.Name())
			}
			assert.Zero(t, conns(), "a probe reached a host loopback service")
			assertNoNewRunDirs(t, before)
		})
	}
}

// TestProbeFailureClosure: every item of the seed's "Failure closure" list
// that a caller can cause gives the byte-identical {"result":"ERROR"} line,
// exit 0 and no stderr; valid results are canonicalised; stdout, stderr,
// exit codes, files and diffs add no symbol. The typed reasons are only in
// the protected audit log.
func TestProbeFailureClosure(t *testing.T) {
	before := runDirs()
	dir := writeAgentFiles(t, map[string]string{
		"ok.py":       `open("/probe/out","w").write('{"result":"NO"}')`,
		"spaced.py":   `print("noise"); import sys; print("x", file=sys.stderr); open("/probe/out","w").write(' { "result" : "\\u0059ES" }\n')`,
		"utf8.py":     `import json; open("/probe/out","w").write(json.dumps({"result":"ja é"}))`,
		"error.py":    `open("/probe/out","w").write('{"result":"ERROR"}')`,
		"other.py":    `open("/probe/out","w").write('{"result":"MAYBE"}')`,
		"dup.py":      `open("/probe/out","w").write('{"result":"YES","result":"YES"}')`,
		"trailing.py": `open("/probe/out","w").write('{"result":"YES"} x')`,
		"extra.py":    `open("/probe/out","w").write('{"result":"YES","why":"x"}')`,
		"array.py":    `open("/probe/out","w").write('["YES"]')`,
		"badutf8.py":  `open("/probe/out","wb").write(b'{"result":"YES\xff"}')`,
		"badjson.py":  `open("/probe/out","w").write('{"result":YES}')`,
		"big.py":      `open("/probe/out","w").write('{"result":"YES"}' + " "*2000)`,
		"missing.py":  `print('{"result":"YES"}')`,
		"symlink.py":  `import os; os.symlink("/etc/hostname","/probe/out")`,
		"fifo.py":     `import os; os.mkfifo("/probe/out")`,
		"crash.py":    `open("/probe/out","w").write('{"result":"YES"}'); raise SystemExit(3)`,
		"raise.py":    `open("/probe/out","w").write('{"result":"YES"}'); raise RuntimeError("secret")`,
		"signal.py":   `import os, signal; open("/probe/out","w").write('{"result":"YES"}'); os.kill(os.getpid(), signal.SIGKILL)`,
		"oom.py":      `open("/probe/out","w").write('{"result":"YES"}'); x = bytearray(200 << 20); x[::4096] = b"x" * len(x[::4096])`,
		"timeout.py":  `open("/probe/out","w").write('{"result":"YES"}'); import time; time.sleep(30)`,
		"diff.py":     `import subprocess; open("/probe/repo/README.md","w").write("diff"); open("/probe/out","w").write('{"result":"YES"}')`,
		// One byte over the script cap (the reference's 256 KiB): refused
		// before anything runs.
		"huge.py": `open("/probe/out","w").write('{"result":"YES"}')` + "\n#" + strings.Repeat("x", proto.MaxProbeScriptBytes),
		// Over a query script's cap, within the reference's: it runs.
		"large.py": `open("/probe/out","w").write('{"result":"YES"}')` + "\n#" + strings.Repeat("x", 200<<10),
	})
	// 32: every request below that reaches the broker counts (wrong routes
	// and methods too), up to "last-counted"; the CLI's local refusals and
	// the other broker's socket do not.
	cfg := writeProbeConfig(t, bq{}, &sp{Enabled: true, Timeout: 1, MemoryLimit: "64m", MaxInvocations: 32,
		PrivateRepos: []probeRepo{{Repo: "demo/a", Source: repoDir}}})
	req := func(repo, o1, o2, o3 string) string {
		return fmt.Sprintf(`curl --silent --noproxy '*' --unix-socket "$AWF_SEALED_PROBE_SOCKET" --max-time 60 -X POST -H 'Expect:' `+
			`-H 'Content-Type: application/octet-stream' -H 'X-AWF-Probe-Version: 1' -H 'X-AWF-Repo: %s' `+
			`-H 'X-AWF-Outcome-1: %s' -H 'X-AWF-Outcome-2: %s' -H 'X-AWF-Outcome-3: %s' --data-binary @%s/ok.py http://localhost/probe`, repo, o1, o2, o3, dir)
	}
	valid := req("demo/a", "YES", "NO", "UNKNOWN")
	script := pHelper + fmt.Sprintf(`
D=%[1]s
p ok --repo demo/a $O3 < $D/ok.py
p canonical --repo demo/a $O3 < $D/spaced.py
p utf8 --repo demo/a --outcome 'ja é' --outcome nein --outcome '?' < $D/utf8.py
p script-error --repo demo/a $O3 < $D/error.py
p undeclared --repo demo/a $O3 < $D/other.py
p duplicate-key --repo demo/a $O3 < $D/dup.py
p trailing --repo demo/a $O3 < $D/trailing.py
p extra-field --repo demo/a $O3 < $D/extra.py
p non-object --repo demo/a $O3 < $D/array.py
p malformed-utf8 --repo demo/a $O3 < $D/badutf8.py
p malformed-json --repo demo/a $O3 < $D/badjson.py
p oversized --repo demo/a $O3 < $D/big.py
p missing --repo demo/a $O3 < $D/missing.py
p symlink-output --repo demo/a $O3 < $D/symlink.py
p fifo-output --repo demo/a $O3 < $D/fifo.py
p nonzero-exit --repo demo/a $O3 < $D/crash.py
p exception --repo demo/a $O3 < $D/raise.py
p signal --repo demo/a $O3 < $D/signal.py
p oom --repo demo/a $O3 < $D/oom.py
p timeout --repo demo/a $O3 < $D/timeout.py
p diff --repo demo/a $O3 < $D/diff.py
p large --repo demo/a $O3 < $D/large.py
p unknown-repo --repo demo/other $O3 < $D/ok.py
echo "bypass-repo $(%[2]s)"
echo "bypass-error-outcome $(%[3]s)"
echo "bypass-two-outcomes $(%[4]s)"
echo "bypass-reference $(%[5]s)"
echo "bypass-version $(%[6]s)"
echo "bypass-oversized $(%[7]s)"
echo "bypass-route $(%[8]s)"
echo "bypass-get $(%[9]s)"
p last-counted --repo demo/a $O3 < $D/ok.py
p exhausted --repo demo/a $O3 < $D/ok.py
p cli-four --repo demo/a $O3 --outcome MAYBE < $D/ok.py
p cli-error-outcome --repo demo/a --outcome YES --outcome NO --outcome ERROR < $D/ok.py
p cli-flag --repo demo/a $O3 --runtime direct < $D/ok.py
p cli-oversized --repo demo/a $O3 < $D/huge.py
AWF_SEALED_PROBE_SOCKET=/nonexistent/broker.sock p proxy-down --repo demo/a $O3 < $D/ok.py
AWF_SEALED_PROBE_SOCKET=$AWF_BOUNDED_QUERY_SOCKET p wrong-broker --repo demo/a $O3 < $D/ok.py
`, dir,
		req("demo/other", "YES", "NO", "UNKNOWN"),
		req("demo/a", "YES", "NO", "ERROR"),
		strings.Replace(req("demo/a", "YES", "NO", "x"), "-H 'X-AWF-Outcome-3: x' ", "", 1),
		valid,
		strings.Replace(valid, "X-AWF-Probe-Version: 1", "X-AWF-Probe-Version: 2", 1),
		strings.Replace(valid, "/ok.py", "/huge.py", 1),
		strings.Replace(valid, "http://localhost/probe", "http://localhost/query", 1),
		strings.Replace(valid, "-X POST", "-X GET", 1))
	r := awfRun(t, cfg, agentScript(t, script))
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	assert.Equal(t, `rc=0 stderr=0 {"result":"NO"}`, got["ok"])
	assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got["canonical"], "the broker re-serialises valid output itself")
	assert.Equal(t, `rc=0 stderr=0 {"result":"ja é"}`, got["utf8"])
	assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got["diff"], "a mutation of the copy is neither an error nor returned")
	assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got["large"], "a script the reference's request cap allows")
	assert.Equal(t, `{"result":"NO"}`, got["bypass-reference"], "the reference client's request")
	assert.Equal(t, `rc=0 stderr=0 {"result":"NO"}`, got["last-counted"])
	for _, name := range []string{"script-error", "undeclared", "duplicate-key", "trailing", "extra-field", "non-object",
		"malformed-utf8", "malformed-json", "oversized", "missing", "symlink-output", "fifo-output", "nonzero-exit",
		"exception", "signal", "oom", "timeout", "unknown-repo", "exhausted", "cli-four", "cli-error-outcome", "cli-flag",
		"cli-oversized", "proxy-down", "wrong-broker"} {
		assert.Equal(t, "rc=0 stderr=0 "+probeErrLine, got[name], name)
	}
	for _, name := range []string{"bypass-repo", "bypass-error-outcome", "bypass-two-outcomes", "bypass-version",
		"bypass-oversized", "bypass-route", "bypass-get"} {
		assert.Equal(t, probeErrLine, got[name], name)
	}
	assert.NotContains(t, r.stdout, "secret")
	assert.NotContains(t, r.stdout, "noise")

	reasons := map[string]int{}
	for _, rec := range probeAudit(t, r.stderr) {
		if rec["kind"] == "failure" {
			reasons[rec["reason"].(string)]++
		}
	}
	for _, want := range []string{"invalid-request", "repo-not-allowed", "timeout", "non-zero-exit", "nonconformant-output",
		"unreadable-output", "oom", "invocation-count-exhausted"} {
		assert.Positive(t, reasons[want], "audit reason %s missing; have %v", want, reasons)
	}
	assertNoNewRunDirs(t, before)
}

// TestProbeParallel: concurrent probes are serialised on the run's one lane,
// each answered correctly, and teardown leaves nothing behind. The agent
// has the probe socket and nothing else of the probe side.
func TestProbeParallel(t *testing.T) {
	before := runDirs()
	dir := writeAgentFiles(t, map[string]string{
		"a.py": `import json, os; open("/probe/repo/NEW","w").write("a"); json.dump({"result": "YES" if os.path.isfile("/probe/repo/SECURITY.md") else "NO"}, open("/probe/out","w"))`,
		"b.py": `import json, os; json.dump({"result": "NO" if os.path.exists("/probe/repo/NEW") else "YES"}, open("/probe/out","w"))`,
	})
	cfg := writeProbeConfig(t, bq{}, &sp{Enabled: true,
		PrivateRepos: []probeRepo{{Repo: "demo/a", Source: repoDir}, {Repo: "demo/b", Source: repoB(t)}}})
	r := awfRun(t, cfg, agentScript(t, pHelper+fmt.Sprintf(`
p a1 --repo demo/a $O3 < %[1]s/a.py > /tmp/awf-e2e-p1.$$ &
p b1 --repo demo/a $O3 < %[1]s/b.py > /tmp/awf-e2e-p2.$$ &
p a2 --repo demo/b $O3 < %[1]s/a.py > /tmp/awf-e2e-p3.$$ &
wait
cat /tmp/awf-e2e-p1.$$ /tmp/awf-e2e-p2.$$ /tmp/awf-e2e-p3.$$
rm -f /tmp/awf-e2e-p?.$$
echo "socket $(test -S "$AWF_SEALED_PROBE_SOCKET" && echo yes)"
echo "credentials $(env | grep -c -e GH_TOKEN -e GITHUB_TOKEN)"
echo "private $(ls /var/lib/awf/private 2>/dev/null | wc -l)"
echo "docker $(for s in /var/run/docker.sock /run/docker.sock /run/awf-test-docker/docker.sock; do test -S $s && test -w $s && echo $s; done | wc -l)"
`, dir)), "GH_TOKEN=ghp_e2estagingtokennevervisible0000000000")
	require.Equal(t, 0, r.code, r.stderr)
	got := lines(r.stdout)
	audit := string(archivedLog(t, r.stderr, "sealed-probe.jsonl"))
	assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got["a1"], "audit:\n%s", audit)
	assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got["b1"], "no probe sees another's writes; audit:\n%s", audit)
	assert.Equal(t, `rc=0 stderr=0 {"result":"NO"}`, got["a2"], "repo B has no SECURITY.md; audit:\n%s", audit)
	// Only the socket enters the agent: no staging credential, private
	// root or usable container-engine socket.
	assert.Equal(t, "yes", got["socket"])
	assert.Equal(t, "0", got["credentials"])
	assert.Equal(t, "0", got["private"])
	assert.Equal(t, "0", got["docker"])
	assertNoNewRunDirs(t, before)
}

// TestProbeDisabledChangesNothing: with sealedProbes absent or disabled the
// agent gets no probe variable, CLI, skill or socket, and bounded queries
// work as before.
func TestProbeDisabledChangesNothing(t *testing.T) {
	check := `
env | grep -c '^AWF_SEALED_PROBE' || true
command -v sealed-probe >/dev/null && echo HAS-CLI
ls "$(dirname "$AWF_BOUNDED_QUERY_SOCKET")/.." | tr '\n' ' '; echo
ls "$(dirname "$AWF_BOUNDED_QUERY_SKILL")" | tr '\n' ' '; echo
printf 'open("/query/out","w").write("true")\n' | bounded-query --repo demo/app --schema '{"type":"boolean"}'
`
	var outs []string
	for _, p := range []*sp{nil, {Enabled: false, PrivateRepos: []probeRepo{{Repo: "demo/a", Source: repoDir}}}} {
		r := awfRun(t, writeProbeConfig(t, bq{}, p), agentScript(t, check), "AWF_SEALED_PROBE_SOCKET=/tmp/inherited.sock")
		require.Equal(t, 0, r.code, r.stderr)
		assert.NotContains(t, r.stderr, "sealed probes")
		outs = append(outs, r.stdout)
	}
	assert.Equal(t, outs[0], outs[1], "absent and disabled give the same run")
	assert.Equal(t, "1\nrun skill \nSKILL.md bounded-query \n"+okTrue+"\n", outs[0],
		"the caller's own variable passes as before; nothing of probes is added")
}

// TestProbePreflightFailsClosed: an unavailable runtime, a seed that cannot
// be staged and a missing staging credential stop awf before the agent
// starts; nothing is left behind.
func TestProbePreflightFailsClosed(t *testing.T) {
	before := runDirs()
	cases := []struct {
		name string
		cfg  func() string
		want string
	}{
		{"sbx is blocked", func() string {
			return writeProbeConfig(t, bq{}, &sp{Enabled: true, Runtime: "sbx", PrivateRepos: []probeRepo{{Repo: "demo/a", Source: repoDir}}})
		}, "sealedProbes"},
		{"seed cannot be staged", func() string {
			return writeProbeConfig(t, bq{}, &sp{Enabled: true, PrivateRepos: []probeRepo{{Repo: "demo/a", Source: "/nonexistent/repo"}}})
		}, "sealed probes"},
		{"credential for a GitHub repo", func() string {
			return writeProbeConfig(t, bq{}, &sp{Enabled: true, PrivateRepos: []probeRepo{{Repo: "demo/a"}}})
		}, "no staging credential"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := awfRun(t, c.cfg(), agentScript(t, "echo AGENT-RAN\n"))
			assert.NotEqual(t, 0, r.code)
			assert.NotContains(t, r.stdout, "AGENT-RAN")
			assert.Contains(t, r.stderr, c.want)
		})
	}
	assertNoNewRunDirs(t, before)
}

// TestProbeOnlyRun: the seed's configuration has only a sealedProbes block.
// The run has one broker, the probe broker, and the agent gets the probe
// CLI, skill and socket and nothing of bounded queries; the seed's example
// script works unchanged. The same configuration in YAML gives the same run.
func TestProbeOnlyRun(t *testing.T) {
	before := runDirs()
	dir := writeAgentFiles(t, map[string]string{"probe.py": `import json
from pathlib import Path

repo = Path("/probe/repo")
# Deterministic computation; repo may be modified locally.
Path("/probe/out").write_text(json.dumps({"result": "YES" if (repo / "SECURITY.md").is_file() else "NO"}))
`})
	rootfs := sharedRootFS()
	doc := map[string]any{
		"boundedQueries": map[string]any{"rootfs": rootfs},
		"agent":          map[string]any{"user": agentUser},
		"sealedProbes": map[string]any{"enabled": true, "privateRepos": []any{map[string]any{"repo": "lpcox/foo", "source": repoDir}},
			"runtime": "direct", "timeout": 30, "memoryLimit": "512m", "interpreter": "python3", "maxInvocations": 2},
	}
	jsonCfg := writeDoc(t, doc)
	yamlCfg := filepath.Join(t.TempDir(), "awf.yaml")
	require.NoError(t, os.WriteFile(yamlCfg, []byte(fmt.Sprintf(`boundedQueries:
  rootfs: {path: %q, digest: %q}
agent:
  user: %q
sealedProbes:
  enabled: true
  privateRepos:
    - {repo: "lpcox/foo", source: %q}
  runtime: direct
  timeout: 30
  memoryLimit: "512m"
  interpreter: python3
  maxInvocations: 2
`, rootfsDir, rootfsHash, agentUser, repoDir)), 0o600))
	script := agentScript(t, pHelper+fmt.Sprintf(`
p seed-example --repo lpcox/foo $O3 < %[1]s/probe.py
p count-spent --repo lpcox/foo $O3 < %[1]s/probe.py
p exhausted --repo lpcox/foo $O3 < %[1]s/probe.py
echo "query-vars $(env | grep -c '^AWF_BOUNDED_QUERY')"
echo "query-cli $(command -v bounded-query >/dev/null && echo yes || echo no)"
echo "skill $(head -2 "$AWF_SEALED_PROBE_SKILL" | tail -1)"
echo "repos $AWF_SEALED_PROBE_REPOS"
`, dir))
	var outs []string
	for _, cfg := range []string{jsonCfg, yamlCfg} {
		r := awfRun(t, cfg, script)
		require.Equal(t, 0, r.code, r.stderr)
		got := lines(r.stdout)
		assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got["seed-example"], cfg)
		assert.Equal(t, `rc=0 stderr=0 {"result":"YES"}`, got["count-spent"], cfg)
		assert.Equal(t, "rc=0 stderr=0 "+probeErrLine, got["exhausted"], cfg)
		assert.Equal(t, "0", got["query-vars"])
		assert.Equal(t, "no", got["query-cli"])
		assert.Equal(t, "name: sealed_probe", got["skill"])
		assert.Equal(t, "lpcox/foo", got["repos"])
		reasons := map[string]int{}
		for _, rec := range probeAudit(t, r.stderr) {
			if rec["kind"] == "failure" {
				reasons[rec["reason"].(string)]++
			}
		}
		assert.Equal(t, map[string]int{"invocation-count-exhausted": 1}, reasons)
		outs = append(outs, r.stdout)
	}
	assert.Equal(t, outs[0], outs[1], "JSON and YAML give the same run")
	assertNoNewRunDirs(t, before)
}
