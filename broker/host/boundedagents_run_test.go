package host

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/apiproxy"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/proto"
)

const agentRunDoc = `{"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/q","sensitivity":"internal","source":"/srv/q"}]},
"apiProxy":{"targets":{"anthropic":{}},"maxRequestBytes":2048,"timeout":30},
"boundedAgents":{"enabled":true,"model":"claude-x","profile":"anthropic","runtime":"gvisor",
"privateRepos":[{"repo":"o/r","sensitivity":"confidential","source":"/srv/r"},{"repo":"o/p","sensitivity":"public","source":"/srv/p"}],
"timeout":60,"memoryLimit":"256m","cpuLimit":"0.5","pidsLimit":64,"tmpfsLimit":"32m",
"maxOutputBytes":100,"maxTaskBytes":200,"maxInvocations":3,"maxModelRequests":4,"maxModelTokens":500}}`

func TestAgentSpecFromConfig(t *testing.T) {
	c := loadAgentConfig(t, agentRunDoc)
	l := NewLayout("0123456789abcdef0123456789abcdef", "/p", "/i", "/a")
	a := newAgentSpec(c, l, "/opt/awf/bin", "")
	assert.Equal(t, "/p/0123456789abcdef0123456789abcdef/agent", a.PrivateRoot, "its own seed map, apart from the queries'")
	assert.NotEqual(t, l.Socket, a.Socket, "its own socket")
	assert.Equal(t, "/i/0123456789abcdef0123456789abcdef/skill/bounded_agent/SKILL.md", a.SkillPath)
	assert.Equal(t, filepath.Join(l.SkillDir, "bounded-agent"), a.CLIPath, "the CLI in the read-only skill directory, on the agent's PATH")
	assert.Equal(t, "/opt/awf/bin/agent-loop", a.LoopBinary)
	assert.Equal(t, "gvisor", a.Runtime)

	lim, err := a.limits()
	require.NoError(t, err)
	assert.Equal(t, int64(256<<20), lim.MemoryBytes)
	assert.Equal(t, int64(500), lim.CPUMilli)
	assert.Equal(t, int64(64), lim.Pids)
	assert.Equal(t, int64(32<<20), lim.QueryTmpfsBytes)
	assert.Equal(t, int64(32<<20), lim.TmpTmpfsBytes)
	assert.LessOrEqual(t, lim.FileSizeBytes, int64(32<<20))
	assert.Equal(t, 60*time.Second, lim.Wall)
	assert.Equal(t, int64(100), lim.OutputBytes)

	ko, err := a.kindOptions("/p/x/audit", nil)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddrPort("169.254.77.1:8080"), ko.Proxy)
	assert.Equal(t, "/p/x/audit/"+AgentTranscriptDir, ko.TranscriptDir)
	assert.Equal(t, 4, ko.MaxModelRequests)
	assert.Equal(t, 500, ko.MaxModelTokens)
	assert.Equal(t, 200, ko.MaxTaskBytes)

	el := EnclaveLimits(c)
	require.NotNil(t, el)
	assert.Equal(t, apiproxy.Limits{Models: map[apiproxy.Protocol]string{apiproxy.Anthropic: "claude-x"}, MaxRequests: 4, MaxTokens: 500,
		MaxRequestBytes: 2048, MaxResponseBytes: 1 << 20, Timeout: 30 * time.Second}, *el)
	assert.Nil(t, EnclaveLimits(loadAgentConfig(t, `{}`)))

	assert.Equal(t, []string{
		proto.AgentSocketEnv + "=" + a.Socket, "AWF_BOUNDED_AGENT_SKILL=" + a.SkillPath,
		"AWF_BOUNDED_AGENT_REPOS=o/r,o/p", "AWF_BOUNDED_AGENT_MAX_TASK_BYTES=200",
	}, agentEnv(&a, []string{"o/r", "o/p"}))
	assert.Nil(t, agentEnv(nil, nil))
	assert.True(t, dropAgentVar(&a, proto.AgentSocketEnv))
	assert.False(t, dropAgentVar(nil, proto.AgentSocketEnv))

	// The spec file carries every value, embedded structs and all: a field
	// name SideSpec and config.AgentParams shared would vanish from JSON.
	assert.Equal(t, c.BoundedAgents.AgentParams, a.AgentParams)
	b, err := json.Marshal(a)
	require.NoError(t, err)
	var back AgentSpec
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, a, back)
}

func TestWriteAgentIngress(t *testing.T) {
	dir := t.TempDir()
	l := NewLayout("0123456789abcdef0123456789abcdef", filepath.Join(dir, "p"), filepath.Join(dir, "i"), filepath.Join(dir, "a"))
	require.NoError(t, os.MkdirAll(l.SkillDir, 0o755))
	a := newAgentSpec(loadAgentConfig(t, agentRunDoc), l, dir, "")
	cli := filepath.Join(dir, "bounded-agent")
	require.NoError(t, os.WriteFile(cli, []byte("#!cli"), 0o755))
	require.NoError(t, writeAgentIngress(a, []broker.SkillRepo{{Repo: "o/r", Sensitivity: "confidential"}}, cli))
	skill, err := os.ReadFile(a.SkillPath)
	require.NoError(t, err)
	assert.Contains(t, string(skill), "- `o/r` — 8 bits/run (`confidential`)")
	assert.Contains(t, string(skill), "at most 200 bytes")
	fi, err := os.Stat(a.CLIPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o555), fi.Mode().Perm())
	fi, err = os.Stat(a.SkillPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	assert.Error(t, writeAgentIngress(a, nil, cli), "never overwritten")
}

// enclaveFake is a runtime that runs enclaves by answering true.
type enclaveFake struct{ ran int }

func (*enclaveFake) Name() string                { return "enclave-fake" }
func (*enclaveFake) Probe(context.Context) error { return nil }
func (*enclaveFake) Sweep(context.Context) error { return nil }
func (*enclaveFake) Usable() error               { return nil }
func (*enclaveFake) Close() error                { return nil }
func (*enclaveFake) Prepare(context.Context, isolate.Template) (isolate.Sandbox, error) {
	return nil, nil
}
func (*enclaveFake) Run(context.Context, isolate.Spec) isolate.Outcome {
	return isolate.Err(isolate.KindLaunchFailed, "not an enclave")
}
func (f *enclaveFake) RunEnclave(_ context.Context, _ isolate.Template, e broker.Enclave) broker.EnclaveOutcome {
	f.ran++
	return broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}}
}

// queryOnly is a runtime that cannot run enclaves.
type queryOnly struct{ enclaveFake }

func (queryOnly) RunEnclave() {}

type fakeIssuer struct{ issued, revoked int }

func (f *fakeIssuer) Issue(context.Context, string, int, int) (string, error) {
	f.issued++
	return "awf-cap-x", nil
}
func (f *fakeIssuer) Revoke(context.Context, string) error { f.revoked++; return nil }

func TestNewAgentBroker(t *testing.T) {
	dir := t.TempDir()
	l := NewLayout("0123456789abcdef0123456789abcdef", filepath.Join(dir, "p"), filepath.Join(dir, "i"), filepath.Join(dir, "a"))
	s := Spec{Layout: l}
	a := newAgentSpec(loadAgentConfig(t, agentRunDoc), l, dir, "")
	audit, err := broker.OpenAudit(l.AuditDir, AgentAuditFile)
	require.NoError(t, err)
	defer audit.Close()
	seeds := []broker.Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "confidential"}}
	lane := make(chan struct{}, 1)

	_, err = newAgentBroker(s, a, &queryOnly{}, seeds, nil, audit, nil, lane, nil, &fakeIssuer{}, 0)
	assert.ErrorContains(t, err, "cannot run an enclave")

	rt, iss := &enclaveFake{}, &fakeIssuer{}
	b, err := newAgentBroker(s, a, rt, seeds, nil, audit, nil, lane, nil, iss, 0)
	require.NoError(t, err)
	req := &broker.Request{Method: "POST", Target: "/query", Headers: []broker.Header{
		{Name: "X-AWF-Agent-Version", Value: "1"}, {Name: "X-AWF-Repo", Value: "o/r"},
		{Name: "X-AWF-Schema-B64", Value: base64.RawURLEncoding.EncodeToString([]byte(`{"type":"boolean"}`))},
	}, Body: []byte("Is there a SECURITY.md?")}
	assert.Equal(t, `{"status":"ok","result":true}`, string(b.Handle(context.Background(), req)))
	assert.Equal(t, 1, rt.ran)
	assert.Equal(t, 1, iss.issued)
	assert.Equal(t, 1, iss.revoked)
	assert.Equal(t, int64(3), b.Ledger().Balance("o/r"))
	assert.Equal(t, `{"status":"error"}`, string(b.Handle(context.Background(), req)), "the confidential budget is spent")
}

func TestBackendSandboxNeedsAnEnclaveBackend(t *testing.T) {
	pol, err := policy.AgentLoop()
	require.NoError(t, err)
	assert.Nil(t, backendSandbox(&queryOnly{}, "/r", pol), "a runtime that renders no enclave layout has no sandbox")
	assert.Nil(t, backendSandbox(&enclaveFake{}, "/r", pol), "a broker-level enclave runner is not a backend")
}

func TestEnclaveLayout(t *testing.T) {
	lim := isolate.DefaultLimits()
	e := broker.Enclave{InvocationID: "i", SeedDir: "/seed", LoopBinary: "/bin/loop", Env: []string{"HOME=/tmp"},
		Files: []broker.EnclaveFile{{Path: broker.EnclaveTaskPath, Content: []byte("t")}}, Limits: lim, TranscriptBytes: 10}
	l := enclaveLayout(e)
	require.NoError(t, l.Validate())
	assert.Equal(t, []enclave.Bind{{Source: "/seed", Path: broker.EnclaveRepoDir}, {Source: "/bin/loop", Path: broker.EnclaveLoopPath, Exec: true}}, l.Binds)
	assert.Equal(t, broker.EnclaveOutDir, l.Out)
	assert.Equal(t, lim.QueryTmpfsBytes, l.OutBytes)
	assert.Equal(t, "result.json", l.Result)
	assert.Equal(t, "transcript.jsonl", l.Transcript)
}
