package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const agentOn = `"enabled":true,"model":"gpt-4o-mini","privateRepos":[{"repo":"o/r","sensitivity":"internal"}]`

// agentCases is the boundedAgents table that the loader and the schema
// must accept or reject alike: every field, its default, its bounds.
var agentCases = []schemaCase{
	{"absent", `{}`, true},
	{"empty", `{"boundedAgents":{}}`, true},
	{"disabled explicit", `{"boundedAgents":{"enabled":false}}`, true},
	{"enabled string", `{"boundedAgents":{"enabled":"true"}}`, false},
	{"enabled minimal", `{"boundedAgents":{` + agentOn + `}}`, true},
	{"enabled no repos", `{"boundedAgents":{"enabled":true,"model":"m"}}`, false},
	{"enabled empty repos", `{"boundedAgents":{"enabled":true,"model":"m","privateRepos":[]}}`, false},
	{"enabled no model", `{"boundedAgents":{"enabled":true,"privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`, false},
	{"disabled no model", `{"boundedAgents":{"privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`, true},
	{"bare string repo", `{"boundedAgents":{"enabled":true,"model":"m","privateRepos":["o/r"]}}`, false},
	{"repo source and ref", `{"boundedAgents":{"privateRepos":[{"repo":"o/r","sensitivity":"sealed","source":"/srv/r","ref":"main"}]}}`, true},
	{"repo extra key", `{"boundedAgents":{"privateRepos":[{"repo":"o/r","sensitivity":"internal","x":1}]}}`, false},
	{"repo bad sensitivity", `{"boundedAgents":{"privateRepos":[{"repo":"o/r","sensitivity":"secret"}]}}`, false},
	{"repo bad slug", `{"boundedAgents":{"privateRepos":[{"repo":"o/..","sensitivity":"internal"}]}}`, false},
	{"repo dup case", `{"boundedAgents":{"privateRepos":[{"repo":"O/R","sensitivity":"internal"},{"repo":"o/r","sensitivity":"public"}]}}`, false},
	{"unknown key", `{"boundedAgents":{"engine":"copilot"}}`, false},
	{"image key", `{"boundedAgents":{"image":"x"}}`, false},
	{"runtime direct", `{"boundedAgents":{"runtime":"direct"}}`, true},
	{"runtime gvisor", `{"boundedAgents":{"runtime":"gvisor"}}`, true},
	{"runtime docker", `{"boundedAgents":{"runtime":"docker"}}`, true},
	{"runtime sbx", `{"boundedAgents":{"runtime":"sbx"}}`, true},
	{"runtime podman", `{"boundedAgents":{"runtime":"podman"}}`, false},
	{"profile openai", `{"boundedAgents":{"profile":"openai"}}`, true},
	{"profile anthropic", `{"boundedAgents":{"profile":"anthropic"}}`, true},
	{"profile copilot", `{"boundedAgents":{"profile":"copilot"}}`, false},
	{"model shape", `{"boundedAgents":{"model":"claude-3-5-haiku@2024"}}`, true},
	{"model empty", `{"boundedAgents":{"model":""}}`, false},
	{"model space", `{"boundedAgents":{"model":"a b"}}`, false},
	{"model too long", `{"boundedAgents":{"model":"` + strings.Repeat("m", 129) + `"}}`, false},
	{"timeout max", `{"boundedAgents":{"timeout":540}}`, true},
	{"timeout over", `{"boundedAgents":{"timeout":541}}`, false},
	{"timeout zero", `{"boundedAgents":{"timeout":0}}`, false},
	{"timeout float", `{"boundedAgents":{"timeout":1.5}}`, false},
	{"timeout 1e2", `{"boundedAgents":{"timeout":1e2}}`, true},
	{"memory", `{"boundedAgents":{"memoryLimit":"1g"}}`, true},
	{"memory small", `{"boundedAgents":{"memoryLimit":"15m"}}`, false},
	{"cpu half", `{"boundedAgents":{"cpuLimit":"0.5"}}`, true},
	{"cpu min", `{"boundedAgents":{"cpuLimit":"0.01"}}`, true},
	{"cpu below", `{"boundedAgents":{"cpuLimit":"0.009"}}`, false},
	{"cpu zero", `{"boundedAgents":{"cpuLimit":"0"}}`, false},
	{"cpu max", `{"boundedAgents":{"cpuLimit":"99.999"}}`, true},
	{"cpu too many decimals", `{"boundedAgents":{"cpuLimit":"1.0001"}}`, false},
	{"cpu number", `{"boundedAgents":{"cpuLimit":1}}`, false},
	{"cpu 100", `{"boundedAgents":{"cpuLimit":"100"}}`, false},
	{"pids min", `{"boundedAgents":{"pidsLimit":8}}`, true},
	{"pids below", `{"boundedAgents":{"pidsLimit":7}}`, false},
	{"pids max", `{"boundedAgents":{"pidsLimit":4096}}`, true},
	{"pids over", `{"boundedAgents":{"pidsLimit":4097}}`, false},
	{"tmpfs", `{"boundedAgents":{"tmpfsLimit":"128m"}}`, true},
	{"tmpfs bad", `{"boundedAgents":{"tmpfsLimit":"64k"}}`, false},
	{"output max", `{"boundedAgents":{"maxOutputBytes":8192}}`, true},
	{"output over", `{"boundedAgents":{"maxOutputBytes":8193}}`, false},
	{"output zero", `{"boundedAgents":{"maxOutputBytes":0}}`, false},
	{"task max", `{"boundedAgents":{"maxTaskBytes":65536}}`, true},
	{"task over", `{"boundedAgents":{"maxTaskBytes":65537}}`, false},
	{"invocations max", `{"boundedAgents":{"maxInvocations":10000}}`, true},
	{"invocations over", `{"boundedAgents":{"maxInvocations":10001}}`, false},
	{"requests max", `{"boundedAgents":{"maxModelRequests":64}}`, true},
	{"requests over", `{"boundedAgents":{"maxModelRequests":65}}`, false},
	{"tokens max", `{"boundedAgents":{"maxModelTokens":32768}}`, true},
	{"tokens over", `{"boundedAgents":{"maxModelTokens":32769}}`, false},
	{"tokens zero", `{"boundedAgents":{"maxModelTokens":0}}`, false},
	{"warm pool off", `{"boundedAgents":{"warmPool":0}}`, true},
	{"warm pool max", `{"boundedAgents":{"warmPool":8}}`, true},
	{"warm pool integral", `{"boundedAgents":{"warmPool":2.0}}`, true},
	{"warm pool over", `{"boundedAgents":{"warmPool":9}}`, false},
	{"warm pool negative", `{"boundedAgents":{"warmPool":-1}}`, false},
	{"warm pool fraction", `{"boundedAgents":{"warmPool":1.5}}`, false},
	{"warm pool string", `{"boundedAgents":{"warmPool":"1"}}`, false},
	{"null block", `{"boundedAgents":null}`, false},
	{"seed example", `{"apiProxy":{"targets":{"openai":{}}},"boundedAgents":{"enabled":true,"privateRepos":[{"repo":"my-org/private-service","sensitivity":"internal"}],"runtime":"docker","profile":"openai","model":"gpt-4o-mini","timeout":120,"memoryLimit":"512m","cpuLimit":"1","pidsLimit":128,"tmpfsLimit":"64m","maxOutputBytes":8192,"maxTaskBytes":4096,"maxInvocations":8,"maxModelRequests":8,"maxModelTokens":1024}}`, true},
}

func TestAgentLoaderAndSchemaAgree(t *testing.T) {
	assertLoaderAndSchemaAgree(t, agentCases)
}

func TestAgentDefaultsAreTheSeeds(t *testing.T) {
	for _, doc := range []string{`{}`, `{"boundedAgents":{}}`} {
		c, err := Load([]byte(doc))
		require.NoError(t, err)
		assert.Equal(t, DefaultBoundedAgents(), c.BoundedAgents, doc)
	}
	d := DefaultBoundedAgents()
	assert.False(t, d.Enabled)
	assert.Equal(t, "direct", d.Runtime)
	assert.Equal(t, "openai", d.Profile)
	assert.Equal(t, 120, d.TimeoutSeconds)
	assert.Equal(t, int64(512<<20), d.MemoryBytes)
	assert.Equal(t, int64(1000), d.CPUMilli)
	assert.Equal(t, 128, d.PidsLimit)
	assert.Equal(t, int64(64<<20), d.TmpfsBytes)
	assert.Equal(t, 8192, d.MaxOutputBytes)
	assert.Equal(t, 4096, d.MaxTaskBytes)
	assert.Equal(t, 8, d.MaxInvocations)
	assert.Equal(t, 8, d.MaxModelRequests)
	assert.Equal(t, 1024, d.MaxModelTokens)
	assert.Equal(t, 1, d.WarmPool, "one enclave prepared ahead per repository, as for queries")
	// The defaults in the schema are the loader's.
	mem, err := ParseMemory(d.MemoryLimit)
	require.NoError(t, err)
	assert.Equal(t, d.MemoryBytes, mem)
	tmp, err := ParseMemory(d.TmpfsLimit)
	require.NoError(t, err)
	assert.Equal(t, d.TmpfsBytes, tmp)
	cpu, err := ParseCPU(d.CPULimit)
	require.NoError(t, err)
	assert.Equal(t, d.CPUMilli, cpu)
}

func TestAgentValuesAreRead(t *testing.T) {
	c, err := Load([]byte(`{"boundedAgents":{"enabled":true,"model":"claude-x","profile":"anthropic","runtime":"gvisor",` +
		`"privateRepos":[{"repo":"My-Org/Svc","sensitivity":"confidential","source":"/srv/svc"}],` +
		`"timeout":30,"memoryLimit":"256m","cpuLimit":"0.25","pidsLimit":64,"tmpfsLimit":"32m",` +
		`"maxOutputBytes":100,"maxTaskBytes":200,"maxInvocations":3,"maxModelRequests":4,"maxModelTokens":500,"warmPool":0}}`))
	require.NoError(t, err)
	b := c.BoundedAgents
	assert.Equal(t, BoundedAgents{
		Enabled: true, PrivateRepos: []Repo{{Repo: "My-Org/Svc", Sensitivity: "confidential", Source: "/srv/svc"}},
		Runtime: "gvisor", MemoryLimit: "256m", CPULimit: "0.25", TmpfsLimit: "32m",
		AgentParams: AgentParams{Profile: "anthropic", Model: "claude-x", TimeoutSeconds: 30,
			MemoryBytes: 256 << 20, CPUMilli: 250, PidsLimit: 64, TmpfsBytes: 32 << 20, MaxOutputBytes: 100, MaxTaskBytes: 200,
			MaxInvocations: 3, MaxModelRequests: 4, MaxModelTokens: 500, WarmPool: 0},
	}, b)
	// The query block keeps its own defaults: the two are independent.
	assert.Equal(t, DefaultMaxInvocations, c.BoundedQueries.MaxInvocations)
}

func TestAgentErrorsNameThePath(t *testing.T) {
	_, err := Load([]byte(`{"boundedAgents":{"enabled":true,"privateRepos":[{"repo":"o/r","sensitivity":"internal"}],"tmpfsLimit":"1k"}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "boundedAgents.model: is required")
	assert.Contains(t, err.Error(), "boundedAgents.tmpfsLimit: tmpfsLimit")
}

func TestParseCPU(t *testing.T) {
	for in, want := range map[string]int64{"1": 1000, "0.5": 500, "0.01": 10, "2.125": 2125, "99.999": 99999, "0.1": 100, "0.05": 50} {
		got, err := ParseCPU(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "0.0", "0.001", "0.009", "-1", "1.", ".5", "01", "1e3", "100", "1.0001", " 1"} {
		_, err := ParseCPU(in)
		assert.Error(t, err, in)
	}
}

func TestAgentProfilePath(t *testing.T) {
	assert.Equal(t, "/v1/chat/completions", AgentProfilePath(TargetOpenAI))
	assert.Equal(t, "/v1/messages", AgentProfilePath(TargetAnthropic))
}

// FuzzLoadAgents checks that the boundedAgents loader never panics and
// accepts exactly what the schema accepts.
func FuzzLoadAgents(f *testing.F) {
	fuzzLoaderAndSchema(f, agentCases)
}

// FuzzParseCPU checks that ParseCPU and its published pattern agree and
// that every accepted value is a valid quota.
func FuzzParseCPU(f *testing.F) {
	for _, s := range []string{"1", "0.5", "0.01", "0.009", "99.999", "100", "1.0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCPU(s)
		if (err == nil) != cpuShape().MatchString(s) {
			t.Fatalf("ParseCPU(%q)=%v disagrees with the pattern", s, err)
		}
		if err == nil && (n < minAgentCPUMilli || n > 99999) {
			t.Fatalf("ParseCPU(%q)=%d out of range", s, n)
		}
	})
}
