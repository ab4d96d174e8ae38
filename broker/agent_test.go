package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// fakeIssuer records the capabilities the broker asks the proxy for.
type fakeIssuer struct {
	mu        sync.Mutex
	issued    []string // callers
	tokens    []string
	revoked   []string
	live      map[string]bool
	issueErr  error
	revokeErr error
}

func (f *fakeIssuer) Issue(_ context.Context, caller string, maxRequests, maxTokens int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.issueErr != nil {
		return "", f.issueErr
	}
	tok := "awf-cap-" + strings.Repeat("ab", 32)[:60] + string(rune('a'+len(f.tokens)%26)) + "000"
	f.issued = append(f.issued, caller)
	f.tokens = append(f.tokens, tok)
	if f.live == nil {
		f.live = map[string]bool{}
	}
	f.live[tok] = true
	return tok, nil
}

func (f *fakeIssuer) Revoke(_ context.Context, tok string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revokeErr != nil {
		return f.revokeErr
	}
	f.revoked = append(f.revoked, tok)
	delete(f.live, tok)
	return nil
}

// fakeEnclaveRuntime is a fakeRuntime that can also run enclaves; it
// records each one and whether its capability was live while it ran.
type fakeEnclaveRuntime struct {
	fakeRuntime
	iss      *fakeIssuer
	enclaves []Enclave
	liveCap  []bool
	answer   func(Enclave) EnclaveOutcome
}

func (f *fakeEnclaveRuntime) RunEnclave(_ context.Context, _ isolate.Template, e Enclave) EnclaveOutcome {
	var cfg LoopConfig
	for _, file := range e.Files {
		if file.Path == EnclaveLoopConfigPath {
			_ = json.Unmarshal(file.Content, &cfg)
		}
	}
	f.iss.mu.Lock()
	live := f.iss.live[cfg.Capability]
	f.iss.mu.Unlock()
	f.mu.Lock()
	f.enclaves = append(f.enclaves, e)
	f.liveCap = append(f.liveCap, live)
	f.mu.Unlock()
	if f.clock != nil {
		f.clock.advance(f.cost)
	}
	if f.answer != nil {
		return f.answer(e)
	}
	return EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}, Transcript: []byte(`{"state":"finished"}` + "\n")}
}

type agentBroker struct {
	b     *Broker
	rt    *fakeEnclaveRuntime
	iss   *fakeIssuer
	clock *fakeClock
	dir   string
}

func agentOptions(dir string, iss CapabilityIssuer) AgentOptions {
	return AgentOptions{
		MaxTaskBytes: 4096, MaxOutputBytes: 8192, Profile: "openai", Model: "gpt-4o-mini",
		Proxy: netip.MustParseAddrPort("169.254.77.1:8080"), MaxModelRequests: 8, MaxModelTokens: 1024,
		Timeout: 120 * time.Second, Limits: isolate.DefaultLimits(), LoopBinary: "/usr/lib/awf/agent-loop",
		Issuer: iss, TranscriptDir: filepath.Join(dir, "audit", "transcripts"),
		Now: func() time.Time { return time.UnixMilli(1_000_000) },
	}
}

func newAgentBroker(t testing.TB, maxInv int, seeds ...Seed) *agentBroker {
	t.Helper()
	dir := t.TempDir()
	a := testAudit(t, dir, "bounded-agent.jsonl")
	iss := &fakeIssuer{}
	k, err := NewAgentKind(agentOptions(dir, iss))
	require.NoError(t, err)
	clock := &fakeClock{}
	rt := &fakeEnclaveRuntime{fakeRuntime: fakeRuntime{clock: clock, cost: 40 * time.Millisecond}, iss: iss}
	b, err := New(Options{Kind: k, Runtime: rt, Template: testTemplate(),
		Seeds: seeds, MaxInvocations: maxInv, Timeout: 120 * time.Second, Clock: clock, Audit: a})
	require.NoError(t, err)
	return &agentBroker{b: b, rt: rt, iss: iss, clock: clock, dir: dir}
}

func agentReq(repo, schema, task string) *Request {
	return schemaReq("X-AWF-Agent-Version", "1", repo, schema, task)
}

func (ab *agentBroker) audit(t *testing.T) string { return auditText(t, ab.dir, "bounded-agent.jsonl") }

const agentTaskText = "Which subsystem owns the retry policy?"

func TestAgentPipelineSuccess(t *testing.T) {
	ab := newAgentBroker(t, 8, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "internal"})
	got := ab.b.Handle(context.Background(), agentReq("O/R", boolS, agentTaskText))
	assert.Equal(t, `{"status":"ok","result":true}`, string(got))
	require.Len(t, ab.rt.enclaves, 1)
	assert.Equal(t, 0, ab.rt.runs(), "an enclave never runs as a query sandbox")
	e := ab.rt.enclaves[0]
	assert.Equal(t, "/seeds/x", e.SeedDir)
	assert.Equal(t, int64(59), ab.b.Ledger().Balance("o/r"), "same charge formula: 1 + 1 + 3")
	assert.Equal(t, 100*time.Millisecond, ab.clock.Now(), "same buckets")

	// The capability was issued for this invocation, live while the enclave
	// ran, and revoked after.
	require.Len(t, ab.iss.issued, 1)
	assert.True(t, strings.HasPrefix(ab.iss.issued[0], "enclave-"))
	assert.Equal(t, "enclave-"+e.InvocationID, ab.iss.issued[0])
	assert.Equal(t, []bool{true}, ab.rt.liveCap)
	assert.Equal(t, ab.iss.tokens, ab.iss.revoked)

	a := ab.audit(t)
	assert.Contains(t, a, `"kind":"invocation","invocationId":"`+e.InvocationID+`","repo":"o/r","sensitivity":"internal","bits":5,"bucketMs":100`)
	assert.NotContains(t, a, agentTaskText, "the audit keeps a digest of the task, not the task")
	assert.Contains(t, a, `"schemaSha256":"`)

	// The transcript is in the protected audit dir only.
	tp := filepath.Join(ab.dir, "audit", "transcripts", e.InvocationID+".jsonl")
	fi, err := os.Stat(tp)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(tp))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
}

func TestAgentEnclaveDescription(t *testing.T) {
	ab := newAgentBroker(t, 8, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "public"})
	schema := `{ "type" : "enum", "values" : ["net","store","api","none"] }`
	require.Equal(t, errBody, string(ab.b.Handle(context.Background(), agentReq("o/r", schema, agentTaskText))), "true is not in the enum")
	require.Len(t, ab.rt.enclaves, 1)
	e := ab.rt.enclaves[0]
	require.NoError(t, e.Validate())
	files := map[string]string{}
	for _, f := range e.Files {
		files[f.Path] = string(f.Content)
	}
	assert.Equal(t, agentTaskText, files[EnclaveTaskPath])
	assert.Equal(t, `{"type":"enum","values":["net","store","api","none"]}`, files[EnclaveSchemaPath])
	var cfg LoopConfig
	d := json.NewDecoder(strings.NewReader(files[EnclaveLoopConfigPath]))
	d.DisallowUnknownFields()
	require.NoError(t, d.Decode(&cfg))
	assert.Equal(t, LoopConfig{
		Profile: "openai", Model: "gpt-4o-mini", Endpoint: "http://169.254.77.1:8080", Capability: ab.iss.tokens[0],
		MaxModelRequests: 8, MaxModelTokens: 1024, MaxOutputBytes: 8192,
		DeadlineUnixMilli: 1_000_000 + 118_000, AnthropicVersion: "2023-06-01",
	}, cfg)
	assert.Len(t, e.Files, 3)
	assert.Equal(t, "/usr/lib/awf/agent-loop", e.LoopBinary)
	assert.Equal(t, []string{EnclaveLoopPath}, e.Argv)
	assert.Equal(t, isolate.SandboxUID, e.UID)
	assert.Equal(t, isolate.SandboxGID, e.GID)
	assert.True(t, e.NoNewPrivileges)
	assert.Equal(t, 120*time.Second, e.Limits.Wall)
	assert.Equal(t, int64(8192), e.ResultBytes)
	for _, v := range e.Env {
		assert.NotRegexp(t, `(?i)token|key|secret|proxy|cap`, v)
	}
	// The enclave's answer is the enum member.
	ab.rt.answer = func(Enclave) EnclaveOutcome {
		return EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: []byte(` "store" `)}}
	}
	assert.Equal(t, `{"status":"ok","result":"store"}`, string(ab.b.Handle(context.Background(), agentReq("o/r", schema, agentTaskText))))
}

func TestEnclaveValidateRefusesMissingControls(t *testing.T) {
	good := Enclave{SeedDir: "/s", LoopBinary: "/l", UID: 65534, GID: 65534, NoNewPrivileges: true,
		Limits: isolate.DefaultLimits(), Proxy: netip.MustParseAddrPort("169.254.77.1:8080"), ResultBytes: 8192}
	require.NoError(t, good.Validate())
	for name, mut := range map[string]func(*Enclave){
		"root uid":      func(e *Enclave) { e.UID = 0 },
		"root gid":      func(e *Enclave) { e.GID = 0 },
		"new privs":     func(e *Enclave) { e.NoNewPrivileges = false },
		"no network":    func(e *Enclave) { e.Proxy = netip.AddrPort{} },
		"host loopback": func(e *Enclave) { e.Proxy = netip.MustParseAddrPort("127.0.0.1:8080") },
		"relative seed": func(e *Enclave) { e.SeedDir = "s" },
		"result cap":    func(e *Enclave) { e.ResultBytes = 9000 },
		"limits":        func(e *Enclave) { e.Limits.Pids = 0 },
	} {
		e := good
		mut(&e)
		assert.Error(t, e.Validate(), name)
	}
}

func TestAgentFailuresAreIdenticalAndRevoke(t *testing.T) {
	out := func(kind isolate.Kind, output string) func(Enclave) EnclaveOutcome {
		return func(Enclave) EnclaveOutcome {
			return EnclaveOutcome{Outcome: isolate.Outcome{Kind: kind, Output: []byte(output), ExitCode: 1}}
		}
	}
	cases := []struct {
		name    string
		answer  func(Enclave) EnclaveOutcome
		reason  string
		enclave int
	}{
		{"nonconformant", out(isolate.KindOK, `"yes"`), ReasonNonconformant, 1},
		{"duplicate keys", out(isolate.KindOK, `{"a":true,"a":false}`), ReasonNonconformant, 1},
		{"trailing", out(isolate.KindOK, `true true`), ReasonNonconformant, 1},
		{"no result", out(isolate.KindOutputMissing, ""), ReasonUnreadableOutput, 1},
		{"loop exit", out(isolate.KindNonzeroExit, ""), ReasonNonZeroExit, 1},
		{"timeout", out(isolate.KindTimeout, ""), ReasonTimeout, 1},
		{"cleanup", out(isolate.KindCleanupFailed, ""), ReasonCleanupFailed, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ab := newAgentBroker(t, 8, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
			ab.rt.answer = tc.answer
			assert.Equal(t, errBody, string(ab.b.Handle(context.Background(), agentReq("o/r", boolS, agentTaskText))))
			assert.Len(t, ab.rt.enclaves, tc.enclave)
			assert.Contains(t, ab.audit(t), `"reason":"`+tc.reason+`"`)
			assert.Equal(t, ab.iss.tokens, ab.iss.revoked, "revoked on every path")
		})
	}
}

func TestAgentResultCappedAtMaxOutputBytes(t *testing.T) {
	dir := t.TempDir()
	o := agentOptions(dir, &fakeIssuer{})
	o.MaxOutputBytes = 4
	k, err := NewAgentKind(o)
	require.NoError(t, err)
	task, err := k.Frame(map[string]string{"x-awf-repo": "o/r", "x-awf-schema-b64": base64.RawURLEncoding.EncodeToString([]byte(boolS))}, []byte("t"))
	require.NoError(t, err)
	got, err := task.Result([]byte("true"))
	require.NoError(t, err)
	assert.Equal(t, `{"status":"ok","result":true}`, string(got))
	_, err = task.Result([]byte("false"))
	assert.Error(t, err, "five bytes exceed maxOutputBytes 4")
	_, err = task.Result([]byte(" true"))
	assert.Error(t, err)
}

func TestAgentCapabilityFailures(t *testing.T) {
	t.Run("issue fails: no enclave", func(t *testing.T) {
		ab := newAgentBroker(t, 8, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
		ab.iss.issueErr = errors.New("proxy gone")
		assert.Equal(t, errBody, string(ab.b.Handle(context.Background(), agentReq("o/r", boolS, agentTaskText))))
		assert.Empty(t, ab.rt.enclaves)
		assert.Contains(t, ab.audit(t), `"reason":"launch-failed"`)
	})
	t.Run("revoke fails: the answer is withheld", func(t *testing.T) {
		ab := newAgentBroker(t, 8, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
		ab.iss.revokeErr = errors.New("proxy gone")
		assert.Equal(t, errBody, string(ab.b.Handle(context.Background(), agentReq("o/r", boolS, agentTaskText))))
		assert.Len(t, ab.rt.enclaves, 1)
		a := ab.audit(t)
		assert.Contains(t, a, `"reason":"cleanup-failed"`)
		assert.Contains(t, a, `"event":"capability-revoke-failed"`)
	})
	t.Run("runtime without enclaves fails closed", func(t *testing.T) {
		dir := t.TempDir()
		a, err := OpenAudit(dir, "bounded-agent.jsonl")
		require.NoError(t, err)
		defer a.Close()
		iss := &fakeIssuer{}
		k, err := NewAgentKind(agentOptions(dir, iss))
		require.NoError(t, err)
		rt := &fakeRuntime{}
		b, err := New(Options{Kind: k, Runtime: rt, Template: isolate.Template{Limits: isolate.DefaultLimits()},
			Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}, MaxInvocations: 2, Timeout: time.Second, Clock: &fakeClock{}, Audit: a})
		require.NoError(t, err)
		assert.Equal(t, errBody, string(b.Handle(context.Background(), agentReq("o/r", boolS, agentTaskText))))
		assert.Equal(t, 0, rt.runs(), "the loop never runs in a query sandbox")
		assert.Empty(t, iss.issued, "no capability for an enclave that cannot run")
	})
}

func TestAgentFramingRules(t *testing.T) {
	base := func() *Request { return agentReq("o/r", boolS, agentTaskText) }
	cases := map[string]func(r *Request){
		"query version":  func(r *Request) { r.Headers[0] = Header{"X-AWF-Query-Version", "2"} },
		"wrong version":  func(r *Request) { r.Headers[0].Value = "2" },
		"missing repo":   func(r *Request) { r.Headers = r.Headers[:1] },
		"repeated repo":  func(r *Request) { r.Headers = append(r.Headers, Header{"x-awf-repo", "o/r"}) },
		"model header":   func(r *Request) { r.Headers = append(r.Headers, Header{"X-AWF-Model", "gpt-4o"}) },
		"runtime header": func(r *Request) { r.Headers = append(r.Headers, Header{"X-AWF-Runtime", "docker"}) },
		"empty task":     func(r *Request) { r.Body = nil },
		"invalid utf8":   func(r *Request) { r.Body = []byte{'a', 0xff} },
		"task too long":  func(r *Request) { r.Body = []byte(strings.Repeat("a", 4097)) },
		"free string": func(r *Request) {
			r.Headers[2].Value = base64.RawURLEncoding.EncodeToString([]byte(`{"type":"string"}`))
		},
		"bad slug":   func(r *Request) { r.Headers[1].Value = "o/.." },
		"body error": func(r *Request) { r.BodyErr = errBodyTooLarge },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			ab := newAgentBroker(t, 32, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
			r := base()
			mutate(r)
			assert.Equal(t, errBody, string(ab.b.Handle(context.Background(), r)))
			assert.Empty(t, ab.rt.enclaves)
			assert.Empty(t, ab.iss.issued)
			assert.Equal(t, 1, ab.b.Used(), "framing failures count")
		})
	}
	// A task of exactly maxTaskBytes, multi-byte UTF-8 included, passes.
	ab := newAgentBroker(t, 32, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
	task := strings.Repeat("é", 2048)
	require.Len(t, task, 4096)
	assert.Equal(t, `{"status":"ok","result":true}`, string(ab.b.Handle(context.Background(), agentReq("o/r", boolS, task))))
}

// TestAgentLedgerIsSeparate: the two subsystems run separate brokers with
// separate ledgers and invocation counts over the same repository, so
// spending on one never consumes the other's balance, either way.
func TestAgentLedgerIsSeparate(t *testing.T) {
	seed := Seed{Repo: "o/conf", Dir: "/s", Sensitivity: "confidential"} // 8 bits: one boolean each
	ab := newAgentBroker(t, 2, seed)
	qb := newTestBroker(t, 2, seed)
	ctx := context.Background()

	assert.Equal(t, `{"status":"ok","result":true}`, string(ab.b.Handle(ctx, agentReq("o/conf", boolS, agentTaskText))))
	assert.Equal(t, errBody, string(ab.b.Handle(ctx, agentReq("o/conf", boolS, agentTaskText))), "the agent budget is spent")
	assert.Equal(t, int64(3), ab.b.Ledger().Balance("o/conf"))
	assert.Equal(t, int64(8), qb.b.Ledger().Balance("o/conf"), "the query ledger is untouched")

	assert.Equal(t, `{"status":"ok","result":true}`, string(qb.b.Handle(ctx, queryReq("o/conf", boolS, script))), "queries still afford their own")
	assert.Equal(t, int64(3), qb.b.Ledger().Balance("o/conf"))
	assert.Equal(t, int64(3), ab.b.Ledger().Balance("o/conf"), "the agent ledger is untouched by queries")

	// maxInvocations is per broker too: the agent broker is exhausted, the
	// query broker has one left.
	assert.Equal(t, 2, ab.b.Used())
	assert.Equal(t, errBody, string(ab.b.Handle(ctx, agentReq("o/conf", constS, agentTaskText))))
	assert.Contains(t, ab.audit(t), `"reason":"invocation-count-exhausted"`)
	assert.Equal(t, 1, qb.b.Used())
	qb.b.Handle(ctx, queryReq("o/conf", constS, script))
	assert.Equal(t, 2, qb.b.Used(), "the query broker still counts its own")
	assert.NotContains(t, qb.audit(t), `"reason":"invocation-count-exhausted"`)
}

func TestAgentSealedNeverLaunches(t *testing.T) {
	ab := newAgentBroker(t, 8, Seed{Repo: "o/s", Dir: "/s", Sensitivity: "sealed"})
	assert.Equal(t, errBody, string(ab.b.Handle(context.Background(), agentReq("o/s", constS, agentTaskText))))
	assert.Empty(t, ab.rt.enclaves)
	assert.Empty(t, ab.iss.issued)
	assert.Contains(t, ab.audit(t), `"reason":"bit-budget-exhausted"`)
}

func TestNewAgentKindRefusesBadOptions(t *testing.T) {
	dir := t.TempDir()
	for name, mut := range map[string]func(*AgentOptions){
		"task cap":        func(o *AgentOptions) { o.MaxTaskBytes = 65537 },
		"output cap":      func(o *AgentOptions) { o.MaxOutputBytes = 0 },
		"profile":         func(o *AgentOptions) { o.Profile = "copilot" },
		"model":           func(o *AgentOptions) { o.Model = "a b" },
		"no proxy":        func(o *AgentOptions) { o.Proxy = netip.AddrPort{} },
		"routable proxy":  func(o *AgentOptions) { o.Proxy = netip.MustParseAddrPort("10.0.0.1:80") },
		"loopback proxy":  func(o *AgentOptions) { o.Proxy = netip.MustParseAddrPort("127.0.0.1:80") },
		"v6 proxy":        func(o *AgentOptions) { o.Proxy = netip.MustParseAddrPort("[fe80::1]:80") },
		"no issuer":       func(o *AgentOptions) { o.Issuer = nil },
		"timeout":         func(o *AgentOptions) { o.Timeout = 541 * time.Second },
		"relative loop":   func(o *AgentOptions) { o.LoopBinary = "loop" },
		"no requests":     func(o *AgentOptions) { o.MaxModelRequests = 0 },
		"relative audit":  func(o *AgentOptions) { o.TranscriptDir = "audit" },
		"limits too tiny": func(o *AgentOptions) { o.Limits.MemoryBytes = 1 },
	} {
		o := agentOptions(dir, &fakeIssuer{})
		mut(&o)
		_, err := NewAgentKind(o)
		assert.Error(t, err, name)
	}
}

func TestSaveTranscript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "transcripts")
	require.NoError(t, SaveTranscript(dir, "0123456789abcdef01234567", []byte(strings.Repeat("x", MaxTranscriptBytes+10))))
	b, err := os.ReadFile(filepath.Join(dir, "0123456789abcdef01234567.jsonl"))
	require.NoError(t, err)
	assert.Len(t, b, MaxTranscriptBytes)
	assert.Error(t, SaveTranscript(dir, "0123456789abcdef01234567", []byte("x")), "never overwritten")
	assert.Error(t, SaveTranscript(dir, "../x", []byte("x")))
}

// FuzzAgentFrame drives the bounded-agent framing with arbitrary header
// values and bodies: it never panics, and a framed task always satisfies
// the rules (slug, finite schema, UTF-8 task within the cap).
func FuzzAgentFrame(f *testing.F) {
	f.Add("o/r", base64.RawURLEncoding.EncodeToString([]byte(boolS)), []byte(agentTaskText))
	f.Add("o/r", base64.RawURLEncoding.EncodeToString([]byte(`{"type":"enum","values":["a","b"]}`)), []byte("é"))
	f.Add("o/..", "e30", []byte{0xff})
	f.Add("", "", []byte{})
	k, err := NewAgentKind(agentOptions(f.TempDir(), &fakeIssuer{}))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, repo, schema string, body []byte) {
		task, err := k.Frame(map[string]string{"x-awf-repo": repo, "x-awf-schema-b64": schema}, body)
		if err != nil {
			return
		}
		require.NoError(t, ValidateTask(body, k.MaxBody()))
		assert.Equal(t, repo, task.Repo())
		assert.Positive(t, task.ChargeBits())
	})
}

func TestLoopState(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"{\"type\":\"task\"}\n": "",
		"{\"type\":\"task\"}\n{\"type\":\"end\",\"state\":\"provider_error\",\"requests\":2}\n": "provider_error",
		"{\"type\":\"end\",\"state\":\"ok\"}":                                                   "ok",
		"{\"type\":\"end\",\"state\":\"leaked-secret-here\"}\n":                                 "unknown",
		"{\"type\":\"end\",\"state\":\"ok\"}\ngarbage":                                          "",
	} {
		assert.Equal(t, want, LoopState([]byte(in)), in)
	}
}

func TestAgentAuditNamesTheLoopState(t *testing.T) {
	ab := newAgentBroker(t, 8, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
	ab.rt.answer = func(Enclave) EnclaveOutcome {
		return EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: 1},
			Transcript: []byte(`{"type":"end","state":"provider_error","requests":1}` + "\n")}
	}
	assert.Equal(t, errBody, string(ab.b.Handle(context.Background(), agentReq("o/r", boolS, agentTaskText))))
	assert.Contains(t, ab.audit(t), `"reason":"non-zero-exit"`)
	assert.Contains(t, ab.audit(t), `loop=provider_error`)
}
