package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fakeprovider"
)

// The bounded-agent end-to-end tests, as far as the pieces exist: the
// configuration and its preflight through awf config validate and awf run
// (every seed failure stops the run before anything is staged, and an
// enabled subsystem is never dropped), and the CLI; then whole runs
// whose bounded-agent questions are answered in real enclaves on direct,
// through the real API proxy, by the scripted fake provider.

var agentBins struct {
	once sync.Once
	err  error
}

// buildAgentBins builds bounded-agent and agent-loop beside awf, once.
func buildAgentBins(t *testing.T) {
	t.Helper()
	agentBins.once.Do(func() {
		// As the Makefile builds them: the CLI with cgo and the seccomp tag,
		// the loop static without cgo.
		for c, env := range map[string][]string{
			"bounded-agent": {"CGO_ENABLED=1", "GOFLAGS=-tags=seccomp"},
			"agent-loop":    {"CGO_ENABLED=0", "GOFLAGS="},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, c), "github.com/awf-project/awf/cmd/"+c)
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				agentBins.err = fmt.Errorf("build %s: %v\n%s", c, err, out)
				return
			}
		}
	})
	require.NoError(t, agentBins.err)
}

const e2eAgentOpenAIKey = "sk-e2e-bounded-agent-key-0000"

// agentConfig writes a config with bounded queries and the boundedAgents
// block ba (nil: absent), an OpenAI API-proxy target pointing nowhere
// (nothing may reach it), and the shared rootfs and agent user.
func agentConfig(t *testing.T, queries bool, proxy bool, ba map[string]any) string {
	t.Helper()
	doc := map[string]any{"agent": map[string]any{"user": agentUser}}
	if queries {
		doc["boundedQueries"] = map[string]any{"enabled": true, "privateRepos": []repo{local("o/q", "internal")},
			"rootfs": sharedRootFS()}
	}
	if proxy {
		doc["apiProxy"] = map[string]any{"targets": map[string]any{"openai": map[string]any{"baseUrl": "http://127.0.0.1:9"}}}
	}
	if ba != nil {
		doc["boundedAgents"] = ba
	}
	return writeDoc(t, doc)
}

func agentBlock(extra map[string]any) map[string]any {
	b := map[string]any{"enabled": true, "model": "gpt-4o-mini", "privateRepos": []repo{local("o/r", "internal")}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func TestBoundedAgentConfigValidate(t *testing.T) {
	validate := func(t *testing.T, path string, preflight bool) (int, string) {
		args := []string{"config", "validate"}
		if preflight {
			args = append(args, "--preflight")
		}
		cmd := exec.Command(awfBin, append(args, path)...)
		cmd.Env = append(os.Environ(), "SUDO_UID=65534", "SUDO_GID=65534")
		r := runCmd(t, cmd)
		return r.code, r.stdout + r.stderr
	}
	cases := []struct {
		name         string
		queries      bool
		proxy        bool
		block        map[string]any
		wantProblems []string
	}{
		{"complete", true, true, agentBlock(nil), nil},
		{"no api proxy", true, false, agentBlock(nil), []string{"apiProxy: bounded agents need the API proxy"}},
		{"no target for the profile", true, true, agentBlock(map[string]any{"profile": "anthropic"}),
			[]string{`apiProxy.targets.anthropic: boundedAgents.profile is "anthropic"`}},
		{"without queries", false, true, agentBlock(nil), []string{"boundedAgents needs boundedQueries.enabled"}},
		{"github source without credential", true, true, agentBlock(map[string]any{"privateRepos": []repo{{Repo: "o/r", Sensitivity: "internal"}}}),
			[]string{"boundedAgents.privateRepos[0].source: o/r is staged from GitHub but no staging credential is set"}},
		{"no model", true, true, map[string]any{"enabled": true, "privateRepos": []repo{local("o/r", "internal")}},
			[]string{"boundedAgents.model: is required when enabled is true"}},
		{"unknown key", true, true, agentBlock(map[string]any{"image": "x"}), []string{`unknown key "image"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := validate(t, agentConfig(t, tc.queries, tc.proxy, tc.block), false)
			if tc.wantProblems == nil {
				assert.Equal(t, 0, code, out)
				return
			}
			assert.Equal(t, 1, code, out)
			for _, w := range tc.wantProblems {
				assert.Contains(t, out, w)
			}
		})
	}
	t.Run("preflight finds the CLI and the loop", func(t *testing.T) {
		// The binaries beside this awf may or may not be built yet; the
		// check names the path either way, and passes once they are.
		buildAgentBins(t)
		code, out := validate(t, agentConfig(t, true, true, agentBlock(nil)), true)
		assert.NotContains(t, out, "bounded agents: bounded-agent")
		assert.NotContains(t, out, "bounded agents: agent-loop")
		assert.Equal(t, 0, code, out)
	})
}

// TestBoundedAgentRunStopsBeforeStaging: every preflight failure of the
// seed stops awf run before anything is staged, the agent never runs, and
// nothing of the run is left.
func TestBoundedAgentRunStopsBeforeStaging(t *testing.T) {
	buildAgentBins(t)
	script := agentScript(t, "echo AGENT_RAN yes\n")
	cases := []struct {
		name    string
		queries bool
		proxy   bool
		block   map[string]any
		want    string
	}{
		{"without queries", false, false, agentBlock(nil), "boundedAgents needs boundedQueries.enabled"},
		{"no api proxy", true, false, agentBlock(nil), "apiProxy: bounded agents need the API proxy"},
		{"no target for the profile", true, true, agentBlock(map[string]any{"profile": "anthropic"}), "apiProxy.targets.anthropic"},
		{"github source without credential", true, true, agentBlock(map[string]any{"privateRepos": []repo{{Repo: "o/r", Sensitivity: "internal"}}}), "no staging credential is set"},
		{"sbx is capability-blocked", true, true, agentBlock(map[string]any{"runtime": "sbx"}), "bounded agents: runtime sbx cannot enforce every control here; no fallback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runDirs()
			res := awfRun(t, agentConfig(t, tc.queries, tc.proxy, tc.block), script, "OPENAI_API_KEY="+e2eAgentOpenAIKey)
			assert.NotEqual(t, 0, res.code, "stderr:\n%s", res.stderr)
			assert.Contains(t, res.stderr, tc.want)
			assert.Contains(t, res.stderr, "preflight")
			assert.NotContains(t, res.stdout, "AGENT_RAN", "the agent ran although the run could never launch an enclave")
			assert.NotContains(t, res.stderr, "awf: staging", "something was staged before the preflight failed")
			assert.NotContains(t, res.stderr, e2eAgentOpenAIKey)
			assertNoNewRunDirs(t, before)
		})
	}
}

// TestBoundedAgentCLIOutsideARun: the CLI without its socket prints the one
// error line, nothing on stderr, exit 0, whatever it is asked.
func TestBoundedAgentCLIOutsideARun(t *testing.T) {
	buildAgentBins(t)
	for _, args := range [][]string{
		{"--repo", "o/r", "--schema", `{"type":"boolean"}`},
		{"--repo", "o/r", "--schema", `{"type":"boolean"}`, "--model", "gpt-4o"},
		{"--help"},
	} {
		cmd := exec.Command(filepath.Join(binDir, "bounded-agent"), args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Stdin = strings.NewReader("Which subsystem owns retries?")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		require.NoError(t, cmd.Run())
		assert.Equal(t, `{"status":"error"}`+"\n", o.String())
		assert.Empty(t, e.String())
	}
}

// agentRunConfig is a run with bounded queries and bounded agents on the
// fake provider: the agent repository o/r has the given sensitivity and
// the fake's CA is the proxy's only root (SSL_CERT_FILE).
func agentRunConfig(t *testing.T, fake *fakeprovider.Server, sensitivity string, extra map[string]any) string {
	t.Helper()
	ba := agentBlock(map[string]any{"privateRepos": []repo{local("o/r", sensitivity)}, "timeout": 30})
	for k, v := range extra {
		ba[k] = v
	}
	doc := map[string]any{
		"agent": map[string]any{"user": agentUser},
		"boundedQueries": map[string]any{"enabled": true, "privateRepos": []repo{local("o/q", "internal")},
			"rootfs": sharedRootFS()},
		"apiProxy":      map[string]any{"targets": map[string]any{"openai": map[string]any{"baseUrl": fake.URL(), "model": "gpt-4o-mini"}}},
		"boundedAgents": ba,
	}
	return writeDoc(t, doc)
}

// agentAsk is an agent script that asks each (schema, task) in turn and
// prints "ANSWER<i> <output> EXIT<status>".
func agentAsk(t *testing.T, asks ...[2]string) string { return agentScript(t, agentAskBody(asks...)) }

func agentAskBody(asks ...[2]string) string {
	var b strings.Builder
	for i, a := range asks {
		// stderr joins stdout: the CLI must print one line and nothing else.
		fmt.Fprintf(&b, "a=$(printf '%%s' %s | bounded-agent --repo o/r --schema %s 2>&1); echo \"ANSWER%d $a EXIT$?\"\n",
			shellQuote(a[1]), shellQuote(a[0]), i)
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runAgents runs one awf run with the fake's CA as the only root.
func runAgents(t *testing.T, fake *fakeprovider.Server, cfg, script string) result {
	t.Helper()
	buildAgentBins(t)
	ca := filepath.Join(t.TempDir(), "fake-ca.pem")
	require.NoError(t, os.WriteFile(ca, fake.CertPEM(), 0o644))
	res := awfRun(t, cfg, script, "OPENAI_API_KEY="+e2eAgentOpenAIKey, "SSL_CERT_FILE="+ca)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	assert.NotContains(t, res.stderr, e2eAgentOpenAIKey)
	assert.NotContains(t, res.stdout, e2eAgentOpenAIKey)
	return res
}

// TestBoundedAgentAnswers: one run, one answer per schema kind, each from
// the loop in its own enclave after one repository tool call; every
// request reached the provider with the real key and never the
// capability; the run leaves nothing behind.
func TestBoundedAgentAnswers(t *testing.T) {
	look := fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}}
	finish := func(v any) fakeprovider.Turn {
		return fakeprovider.Turn{Kind: fakeprovider.Finish, Args: map[string]any{"result": v}}
	}
	kinds := []struct {
		schema string
		result any
		want   string
	}{
		{`{"type":"boolean"}`, true, `true`},
		{`{"type":"enum","values":["go","rust"]}`, "go", `"go"`},
		{`{"type":"integer","minimum":0,"maximum":9}`, 7, `7`},
		{`{"type":"array","items":{"type":"boolean"},"length":2}`, []any{true, false}, `[true,false]`},
		{`{"type":"object","fields":{"k":{"type":"enum","values":["a","b"]}}}`, map[string]any{"k": "b"}, `{"k":"b"}`},
		{`{"type":"union","variants":{"a":{"type":"boolean"},"b":{"type":"integer","minimum":0,"maximum":3}}}`, map[string]any{"tag": "b", "value": 2}, `{"tag":"b","value":2}`},
	}
	var turns []fakeprovider.Turn
	var asks [][2]string
	for _, k := range kinds {
		turns = append(turns, look, finish(k.result))
		asks = append(asks, [2]string{k.schema, "What does the README say?"})
	}
	fake := fakeprovider.New(t, turns...)
	res := runAgents(t, fake, agentRunConfig(t, fake, "public", map[string]any{"maxInvocations": 10}), agentAsk(t, asks...))
	got := lines(res.stdout)
	for i, k := range kinds {
		ans := got[fmt.Sprintf("ANSWER%d", i)]
		assert.Equal(t, `{"status":"ok","result":`+k.want+`} EXIT0`, ans, "schema %s\nstderr:\n%s", k.schema, res.stderr)
	}
	reqs := fake.Requests()
	require.Equal(t, 2*len(kinds), len(reqs), "two requests per question")
	for _, r := range reqs {
		assert.Equal(t, "/v1/chat/completions", r.Path)
		assert.Equal(t, "Bearer "+e2eAgentOpenAIKey, r.Header.Get("Authorization"))
		assert.NotContains(t, string(r.Body), "awf-cap-")
	}
	assert.Contains(t, string(reqs[1].Body), "README", "the loop listed the read-only seed")
	assertRunRemoved(t, res.stderr)
}

// agentAudit returns the archived bounded-agent audit log of a run.
func agentAudit(t *testing.T, stderr string) string {
	t.Helper()
	const marker = "audit log kept in "
	i := strings.LastIndex(stderr, marker)
	require.GreaterOrEqual(t, i, 0, "no audit archive in:\n%s", stderr)
	dir := strings.TrimSpace(strings.SplitN(stderr[i+len(marker):], "\n", 2)[0])
	raw, err := os.ReadFile(filepath.Join(dir, "bounded-agent.jsonl"))
	require.NoError(t, err)
	return string(raw)
}

// TestBoundedAgentLoopRules: one run, one question per rule. finish before
// any repository tool is refused and the loop goes on; a prose reply gets
// the recovery message, then finish is forced; a second prose reply, a
// truncated reply and a provider that answers garbage are explicit
// failures: the canonical error for the agent, the loop's terminal state
// as the audit category for the operator. Then maxInvocations is spent:
// one more question is refused before any request.
func TestBoundedAgentLoopRules(t *testing.T) {
	look := fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}}
	fin := fakeprovider.Turn{Kind: fakeprovider.Finish}
	cases := []struct {
		name  string
		turns []fakeprovider.Turn
		ok    bool
		state string // the audit category of a failure
	}{
		{"finish before inspection is refused", []fakeprovider.Turn{fin, look, fin}, true, ""},
		{"prose, then finish is forced", []fakeprovider.Turn{look, {Kind: fakeprovider.Prose}, fin}, true, ""},
		{"prose after the recovery message", []fakeprovider.Turn{look, {Kind: fakeprovider.Prose}, {Kind: fakeprovider.Prose}}, false, "no_tool_call"},
		{"truncation is an error", []fakeprovider.Turn{look, {Kind: fakeprovider.Truncated}}, false, "truncated"},
		// The proxy answers garbage from upstream with a 502, which the loop
		// retries once.
		{"a provider answering garbage", []fakeprovider.Turn{{Kind: fakeprovider.Malformed}, {Kind: fakeprovider.Malformed}}, false, "provider_error"},
		{"a provider failing with 500", []fakeprovider.Turn{look, {Kind: fakeprovider.ServerError}, {Kind: fakeprovider.ServerError}}, false, "provider_error"},
	}
	var turns []fakeprovider.Turn
	var asks [][2]string
	for _, c := range cases {
		turns = append(turns, c.turns...)
		asks = append(asks, [2]string{`{"type":"boolean"}`, "Is there a README?"})
	}
	asks = append(asks, [2]string{`{"type":"boolean"}`, "One more?"})
	fake := fakeprovider.New(t, turns...)
	// public: unmetered, so that only the loop's rules and the count decide.
	cfg := agentRunConfig(t, fake, "public", map[string]any{"maxInvocations": len(cases)})
	script := agentAsk(t, asks...)
	res := runAgents(t, fake, cfg, script)
	audit := agentAudit(t, res.stderr)
	got := lines(res.stdout)
	for i, c := range cases {
		want := `{"status":"error"} EXIT0`
		if c.ok {
			want = `{"status":"ok","result":true} EXIT0`
		}
		assert.Equal(t, want, got[fmt.Sprintf("ANSWER%d", i)], "%s\naudit:\n%s", c.name, audit)
	}
	assert.Equal(t, `{"status":"error"} EXIT0`, got[fmt.Sprintf("ANSWER%d", len(cases))], "maxInvocations is spent")
	reqs := fake.Requests()
	require.Equal(t, len(turns), len(reqs), "every scripted turn was asked for, and nothing more")
	assert.Contains(t, string(reqs[1].Body), "finish is refused until the repository has been inspected")
	assert.Contains(t, string(reqs[5].Body), `"finish"`, "the forced finish names the tool")
	for _, c := range cases {
		if !c.ok {
			assert.Contains(t, audit, "loop="+c.state, c.name)
		}
	}
	assert.Contains(t, audit, "invocation-count-exhausted")
	assert.NotContains(t, audit, "awf-cap-")
	assertRunRemoved(t, res.stderr)
}

// TestBoundedAgentBudget: a confidential repository's bits are charged as
// for a bounded query; once they are spent a question is refused before
// the enclave starts (no provider request), and the bounded-query
// subsystem beside still answers: its ledger and count are its own.
func TestBoundedAgentBudget(t *testing.T) {
	look := fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}}
	fake := fakeprovider.New(t, look, fakeprovider.Turn{Kind: fakeprovider.Finish})
	ask := [2]string{`{"type":"boolean"}`, "Is there a README?"}
	script := agentScript(t, agentAskBody(ask, ask)+`printf 'import json\njson.dump(True, open("/query/out", "w"))\n' > /tmp/q.$$.py
echo "QUERY $(bounded-query --repo o/q --schema '{"type":"boolean"}' < /tmp/q.$$.py)"
rm -f /tmp/q.$$.py
`)
	res := runAgents(t, fake, agentRunConfig(t, fake, "confidential", nil), script)
	audit := agentAudit(t, res.stderr)
	got := lines(res.stdout)
	assert.Equal(t, `{"status":"ok","result":true} EXIT0`, got["ANSWER0"], "audit:\n%s", audit)
	assert.Equal(t, `{"status":"error"} EXIT0`, got["ANSWER1"], "the confidential budget is spent")
	assert.Equal(t, `{"status":"ok","result":true}`, got["QUERY"], "the bounded-query subsystem keeps its own ledger")
	assert.Equal(t, 2, fake.Count(), "the refused question never reached the provider")
	assert.Contains(t, audit, `"bits":5`)
	assert.Contains(t, audit, "bit-budget-exhausted")
	assertRunRemoved(t, res.stderr)
}

// TestBoundedAgentEnclaveConfinement runs on each enclave runtime: a model
// that asks the loop for files outside the seed (the loop's own config,
// which holds the capability, by a relative and an absolute path, and the
// host's /etc/passwd) gets error results, never their bytes, and still
// answers after a real inspection. The network side (every address but the
// proxy unreachable, by each layer alone) is awf isolate verify --enclave,
// which runs the probe in the same enclave.
func TestBoundedAgentEnclaveConfinement(t *testing.T) {
	for _, rt := range []string{"direct", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			read := func(p string) fakeprovider.Turn {
				return fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "read_file", Args: map[string]any{"path": p}}
			}
			fake := fakeprovider.New(t, read("../loop.json"), read("/enclave/loop.json"), read("../../etc/passwd"),
				fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}},
				fakeprovider.Turn{Kind: fakeprovider.Finish})
			res := runAgents(t, fake, agentRunConfig(t, fake, "public", map[string]any{"runtime": rt, "maxModelRequests": 6}),
				agentAsk(t, [2]string{`{"type":"boolean"}`, "Is there a README?"}))
			assert.Equal(t, `{"status":"ok","result":true} EXIT0`, lines(res.stdout)["ANSWER0"], "stderr:\n%s", res.stderr)
			reqs := fake.Requests()
			require.Equal(t, 5, len(reqs))
			last := string(reqs[len(reqs)-1].Body)
			for _, leak := range []string{"awf-cap-", "capability", "root:x:0"} {
				assert.NotContains(t, last, leak, "a file outside the seed reached the provider")
			}
			assertRunRemoved(t, res.stderr)
		})
	}
}
