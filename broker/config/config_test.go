package config

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaCase is one document that the loader and the published JSON
// Schema must both accept (ok) or both refuse.
type schemaCase struct {
	name string
	doc  string
	ok   bool
}

// configCases is the table that both the loader and the JSON Schema must
// accept (ok) or reject alike.
var configCases = []schemaCase{
	{"empty object", `{}`, true},
	{"schema key", `{"$schema":"x"}`, true},
	{"unknown top key", `{"container":{}}`, false},
	{"not an object", `[]`, false},
	{"disabled no repos", `{"boundedQueries":{}}`, true},
	{"disabled explicit", `{"boundedQueries":{"enabled":false}}`, true},
	{"enabled no repos", `{"boundedQueries":{"enabled":true}}`, false},
	{"enabled empty repos", `{"boundedQueries":{"enabled":true,"privateRepos":[]}}`, false},
	{"enabled one repo", `{"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`, true},
	{"enabled string", `{"boundedQueries":{"enabled":"true","privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`, false},
	{"legacy string", `{"boundedQueries":{"enabled":true,"privateRepos":["my-org/svc"]}}`, true},
	{"legacy bad slug", `{"boundedQueries":{"enabled":true,"privateRepos":["https://github.com/o/r"]}}`, false},
	{"missing sensitivity", `{"boundedQueries":{"privateRepos":[{"repo":"o/r"}]}}`, false},
	{"bad sensitivity", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"secret"}]}}`, false},
	{"sealed", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"sealed"}]}}`, true},
	{"extra repo key", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","x":1}]}}`, false},
	{"repo number", `{"boundedQueries":{"privateRepos":[7]}}`, false},
	{"dup exact", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public"},{"repo":"o/r","sensitivity":"sealed"}]}}`, false},
	{"dup case", `{"boundedQueries":{"privateRepos":[{"repo":"O/R","sensitivity":"public"},"o/r"]}}`, false},
	{"distinct", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public"},"o/r2"]}}`, true},
	{"slug traversal", `{"boundedQueries":{"privateRepos":[{"repo":"o/..","sensitivity":"public"}]}}`, false},
	{"slug dot", `{"boundedQueries":{"privateRepos":[{"repo":"o/.","sensitivity":"public"}]}}`, false},
	{"slug dotdot inside", `{"boundedQueries":{"privateRepos":[{"repo":"o/a..b","sensitivity":"public"}]}}`, false},
	{"slug hidden", `{"boundedQueries":{"privateRepos":[{"repo":"o/.github","sensitivity":"public"}]}}`, true},
	{"slug trailing dot", `{"boundedQueries":{"privateRepos":[{"repo":"o/a.","sensitivity":"public"}]}}`, true},
	{"slug extra segment", `{"boundedQueries":{"privateRepos":[{"repo":"o/r/x","sensitivity":"public"}]}}`, false},
	{"slug wildcard", `{"boundedQueries":{"privateRepos":[{"repo":"o/*","sensitivity":"public"}]}}`, false},
	{"slug query", `{"boundedQueries":{"privateRepos":[{"repo":"o/r?x","sensitivity":"public"}]}}`, false},
	{"slug owner dash first", `{"boundedQueries":{"privateRepos":[{"repo":"-o/r","sensitivity":"public"}]}}`, false},
	{"slug owner too long", `{"boundedQueries":{"privateRepos":[{"repo":"` + strings.Repeat("a", 40) + `/r","sensitivity":"public"}]}}`, false},
	{"slug owner max", `{"boundedQueries":{"privateRepos":[{"repo":"` + strings.Repeat("a", 39) + `/r","sensitivity":"public"}]}}`, true},
	{"slug name too long", `{"boundedQueries":{"privateRepos":[{"repo":"o/` + strings.Repeat("a", 101) + `","sensitivity":"public"}]}}`, false},
	{"slug newline", `{"boundedQueries":{"privateRepos":[{"repo":"o/r\nx/y","sensitivity":"public"}]}}`, false},
	{"source local", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","source":"/srv/git/r"}]}}`, true},
	{"source https", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","source":"https://git.example/o/r.git"}]}}`, true},
	{"source http", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","source":"http://git.example/o/r.git"}]}}`, false},
	{"source relative", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","source":"srv/r"}]}}`, false},
	{"ref branch", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","ref":"release/v1.2"}]}}`, true},
	{"ref option", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","ref":"--upload-pack=x"}]}}`, false},
	{"ref dotdot", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","ref":"a..b"}]}}`, false},
	{"ref empty", `{"boundedQueries":{"privateRepos":[{"repo":"o/r","sensitivity":"public","ref":""}]}}`, false},
	{"runtime direct", `{"boundedQueries":{"runtime":"direct"}}`, true},
	{"runtime gvisor", `{"boundedQueries":{"runtime":"gvisor"}}`, true},
	{"runtime docker", `{"boundedQueries":{"runtime":"docker"}}`, true},
	{"runtime sbx", `{"boundedQueries":{"runtime":"sbx"}}`, true},
	{"runtime other", `{"boundedQueries":{"runtime":"podman"}}`, false},
	{"timeout min", `{"boundedQueries":{"timeout":1}}`, true},
	{"timeout max", `{"boundedQueries":{"timeout":540}}`, true},
	{"timeout over", `{"boundedQueries":{"timeout":541}}`, false},
	{"timeout zero", `{"boundedQueries":{"timeout":0}}`, false},
	{"timeout float integral", `{"boundedQueries":{"timeout":30.0}}`, true},
	{"timeout exp integral", `{"boundedQueries":{"timeout":3e1}}`, true},
	{"timeout fraction", `{"boundedQueries":{"timeout":30.5}}`, false},
	{"timeout string", `{"boundedQueries":{"timeout":"30"}}`, false},
	{"timeout huge", `{"boundedQueries":{"timeout":1e400}}`, false},
	{"memory m", `{"boundedQueries":{"memoryLimit":"512m"}}`, true},
	{"memory g", `{"boundedQueries":{"memoryLimit":"1g"}}`, true},
	{"memory 16m", `{"boundedQueries":{"memoryLimit":"16m"}}`, true},
	{"memory 15m", `{"boundedQueries":{"memoryLimit":"15m"}}`, false},
	{"memory bytes", `{"boundedQueries":{"memoryLimit":"536870912"}}`, false},
	{"memory leading zero", `{"boundedQueries":{"memoryLimit":"0512m"}}`, false},
	{"interpreter", `{"boundedQueries":{"interpreter":"python3"}}`, true},
	{"interpreter other", `{"boundedQueries":{"interpreter":"python2"}}`, false},
	{"max invocations", `{"boundedQueries":{"maxInvocations":10000}}`, true},
	{"max invocations over", `{"boundedQueries":{"maxInvocations":10001}}`, false},
	{"max invocations zero", `{"boundedQueries":{"maxInvocations":0}}`, false},
	{"warm pool off", `{"boundedQueries":{"warmPool":0}}`, true},
	{"warm pool max", `{"boundedQueries":{"warmPool":8}}`, true},
	{"warm pool integral", `{"boundedQueries":{"warmPool":2.0}}`, true},
	{"warm pool over", `{"boundedQueries":{"warmPool":9}}`, false},
	{"warm pool negative", `{"boundedQueries":{"warmPool":-1}}`, false},
	{"warm pool fraction", `{"boundedQueries":{"warmPool":1.5}}`, false},
	{"warm pool string", `{"boundedQueries":{"warmPool":"1"}}`, false},
	{"rootfs", `{"boundedQueries":{"rootfs":{"path":"/var/lib/awf/rootfs","digest":"sha256:` + strings.Repeat("a", 64) + `"}}}`, true},
	{"rootfs no digest", `{"boundedQueries":{"rootfs":{"path":"/x"}}}`, false},
	{"rootfs bad digest", `{"boundedQueries":{"rootfs":{"path":"/x","digest":"sha256:ABC"}}}`, false},
	{"rootfs relative", `{"boundedQueries":{"rootfs":{"path":"x","digest":"sha256:` + strings.Repeat("a", 64) + `"}}}`, false},
	{"docker socket", `{"boundedQueries":{"runtime":"docker","dockerSocket":"/run/docker.sock"}}`, true},
	{"docker tcp", `{"boundedQueries":{"runtime":"docker","dockerSocket":"tcp://1.2.3.4:2375"}}`, false},
	{"runsc path", `{"boundedQueries":{"runscPath":"/usr/bin/runsc"}}`, true},
	{"unknown bq key", `{"boundedQueries":{"timeoutSeconds":5}}`, false},
	{"agent name", `{"agent":{"user":"runner"}}`, true},
	{"agent uid", `{"agent":{"user":1001}}`, true},
	{"agent uid zero", `{"agent":{"user":0}}`, false},
	{"agent uid negative", `{"agent":{"user":-1}}`, false},
	{"agent bad name", `{"agent":{"user":"Runner Bob"}}`, false},
	{"agent empty", `{"agent":{}}`, true},
	{"agent extra", `{"agent":{"user":"x","group":"y"}}`, false},
	{"agent bool", `{"agent":{"user":true}}`, false},
	{"env allow", `{"agent":{"env":{"allow":["OPENAI_API_KEY","ANTHROPIC_API_KEY"]}}}`, true},
	{"env allow empty", `{"agent":{"env":{"allow":[]}}}`, true},
	{"env empty", `{"agent":{"env":{}}}`, true},
	{"env allow GH_TOKEN", `{"agent":{"env":{"allow":["GH_TOKEN"]}}}`, false},
	{"env allow GITHUB_TOKEN", `{"agent":{"env":{"allow":["OPENAI_API_KEY","GITHUB_TOKEN"]}}}`, false},
	{"env allow enterprise", `{"agent":{"env":{"allow":["GH_ENTERPRISE_TOKEN"]}}}`, false},
	{"env allow copilot", `{"agent":{"env":{"allow":["COPILOT_GITHUB_TOKEN"]}}}`, false},
	{"env allow github pat", `{"agent":{"env":{"allow":["GITHUB_PAT"]}}}`, false},
	{"env allow github by rule", `{"agent":{"env":{"allow":["HOMEBREW_GITHUB_API_TOKEN"]}}}`, false},
	{"env allow gh by rule", `{"agent":{"env":{"allow":["GH_PAT"]}}}`, false},
	{"env allow actions", `{"agent":{"env":{"allow":["ACTIONS_RUNTIME_TOKEN"]}}}`, false},
	{"env allow actions url", `{"agent":{"env":{"allow":["ACTIONS_CACHE_URL"]}}}`, false},
	{"env allow github non-credential", `{"agent":{"env":{"allow":["GITHUB_REPOSITORY"]}}}`, true},
	{"env allow lower case", `{"agent":{"env":{"allow":["openai_api_key"]}}}`, false},
	{"env allow bad name", `{"agent":{"env":{"allow":["A=B"]}}}`, false},
	{"env allow empty name", `{"agent":{"env":{"allow":[""]}}}`, false},
	{"env allow number", `{"agent":{"env":{"allow":[1]}}}`, false},
	{"env allow string", `{"agent":{"env":{"allow":"OPENAI_API_KEY"}}}`, false},
	{"env unknown key", `{"agent":{"env":{"deny":[]}}}`, false},
	{"env not object", `{"agent":{"env":[]}}`, false},
	{"network host", `{"agent":{"network":"host"}}`, true},
	{"network none", `{"agent":{"network":"none"}}`, true},
	{"network bridge", `{"agent":{"network":"bridge"}}`, false},
	{"network bool", `{"agent":{"network":false}}`, false},
	{"persisted true", `{"agent":{"allowPersistedCredentials":true}}`, true},
	{"persisted false", `{"agent":{"allowPersistedCredentials":false}}`, true},
	{"persisted string", `{"agent":{"allowPersistedCredentials":"yes"}}`, false},
	{"agent null", `{"agent":null}`, false},
	{"api proxy seed example", `{"apiProxy":{"targets":{"openai":{}}}}`, true},
	{"api proxy both targets", `{"apiProxy":{"targets":{"openai":{"model":"gpt-4o-mini"},"anthropic":{"model":"claude-sonnet-4-5","apiKeyEnv":"MY_ANTHROPIC_KEY"}}}}`, true},
	{"api proxy no targets", `{"apiProxy":{}}`, false},
	{"api proxy empty targets", `{"apiProxy":{"targets":{}}}`, false},
	{"api proxy unknown target", `{"apiProxy":{"targets":{"gemini":{}}}}`, false},
	{"api proxy unknown key", `{"apiProxy":{"targets":{"openai":{}},"streaming":true}}`, false},
	{"api proxy target unknown key", `{"apiProxy":{"targets":{"openai":{"insecure":true}}}}`, false},
	{"api proxy https base", `{"apiProxy":{"targets":{"openai":{"baseUrl":"https://llm.example.com:8443/openai"}}}}`, true},
	{"api proxy http loopback", `{"apiProxy":{"targets":{"openai":{"baseUrl":"http://127.0.0.1:8000"}}}}`, true},
	{"api proxy http v6 loopback", `{"apiProxy":{"targets":{"anthropic":{"baseUrl":"http://[::1]:8000/"}}}}`, true},
	{"api proxy http remote", `{"apiProxy":{"targets":{"openai":{"baseUrl":"http://llm.example.com"}}}}`, false},
	{"api proxy http loopback lookalike", `{"apiProxy":{"targets":{"openai":{"baseUrl":"http://127.0.0.1.example.com"}}}}`, false},
	{"api proxy http localhost", `{"apiProxy":{"targets":{"openai":{"baseUrl":"http://localhost:8000"}}}}`, false},
	{"api proxy user info", `{"apiProxy":{"targets":{"openai":{"baseUrl":"https://u:p@llm.example.com"}}}}`, false},
	{"api proxy query", `{"apiProxy":{"targets":{"openai":{"baseUrl":"https://llm.example.com/?k=v"}}}}`, false},
	{"api proxy other scheme", `{"apiProxy":{"targets":{"openai":{"baseUrl":"ftp://llm.example.com"}}}}`, false},
	{"api proxy key env lower", `{"apiProxy":{"targets":{"openai":{"apiKeyEnv":"openai_api_key"}}}}`, false},
	{"api proxy model bad", `{"apiProxy":{"targets":{"openai":{"model":" gpt"}}}}`, false},
	{"api proxy limits", `{"apiProxy":{"targets":{"openai":{}},"maxModelRequests":100,"maxModelTokens":4096,"maxRequestBytes":1048576,"maxResponseBytes":2097152,"timeout":120}}`, true},
	{"api proxy zero requests", `{"apiProxy":{"targets":{"openai":{}},"maxModelRequests":0}}`, false},
	{"api proxy tokens too many", `{"apiProxy":{"targets":{"openai":{}},"maxModelTokens":1000001}}`, false},
	{"api proxy tiny body", `{"apiProxy":{"targets":{"openai":{}},"maxRequestBytes":1023}}`, false},
	{"api proxy timeout too long", `{"apiProxy":{"targets":{"openai":{}},"timeout":541}}`, false},
	{"api proxy null", `{"apiProxy":null}`, false},
}

func checkSchema(t testing.TB, doc []byte) error {
	t.Helper()
	root, err := DecodeJSON(Schema())
	require.NoError(t, err)
	tree, err := DecodeJSON(doc)
	if err != nil {
		return err
	}
	c := &schemaChecker{root: root.(map[string]any)}
	return c.check(c.root, tree, "config")
}

// assertLoaderAndSchemaAgree runs each case as a subtest: the loader and
// the schema both accept it, or both refuse it.
func assertLoaderAndSchemaAgree(t *testing.T, cases []schemaCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, lerr := Load([]byte(tc.doc))
			serr := checkSchema(t, []byte(tc.doc))
			if tc.ok {
				assert.NoError(t, lerr, "loader")
				assert.NoError(t, serr, "schema")
			} else {
				assert.Error(t, lerr, "loader")
				assert.Error(t, serr, "schema")
			}
		})
	}
}

func TestLoaderAndSchemaAgree(t *testing.T) {
	assertLoaderAndSchemaAgree(t, configCases)
}

func TestPublishedSchemaIsTheEmbeddedOne(t *testing.T) {
	docs, err := os.ReadFile("../../docs/awf-config.schema.json")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(docs, Schema()), "docs/awf-config.schema.json differs from broker/config/schema.json; copy it")
}

func TestDefaultsAndNormalisation(t *testing.T) {
	c, err := Load([]byte(`{"boundedQueries":{"enabled":true,"privateRepos":["my-org/svc",{"repo":"my-org/Docs","sensitivity":"public","ref":"v1"}]}}`))
	require.NoError(t, err)
	b := c.BoundedQueries
	assert.True(t, b.Enabled)
	assert.Equal(t, "direct", b.Runtime)
	assert.Equal(t, 30, b.TimeoutSeconds)
	assert.Equal(t, int64(512<<20), b.MemoryBytes)
	assert.Equal(t, 32, b.MaxInvocations)
	assert.Equal(t, 1, b.WarmPool)
	require.Len(t, b.PrivateRepos, 2)
	assert.Equal(t, Repo{Repo: "my-org/svc", Sensitivity: "internal", Legacy: true}, b.PrivateRepos[0])
	assert.Equal(t, Repo{Repo: "my-org/Docs", Sensitivity: "public", Ref: "v1"}, b.PrivateRepos[1])
	require.Len(t, c.Warnings, 1)
	assert.Contains(t, c.Warnings[0], "deprecated")
}

func TestDecodeRejectsDuplicatesAndTrailing(t *testing.T) {
	for _, doc := range []string{`{"a":1,"a":2}`, `{} {}`, `{}x`, ``, `{"a":}`, `{"a":1,}`} {
		_, err := DecodeJSON([]byte(doc))
		assert.Error(t, err, doc)
	}
}

func TestErrorsNameThePath(t *testing.T) {
	_, err := Load([]byte(`{"boundedQueries":{"timeout":900,"privateRepos":[{"repo":"o/r","sensitivity":"secret"}]}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "boundedQueries.timeout: 900 is out of range 1..540")
	assert.Contains(t, err.Error(), `boundedQueries.privateRepos[0].sensitivity: "secret" is not one of`)
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{"16m": 16 << 20, "512M": 512 << 20, "1g": 1 << 30, "999g": 999 << 30} {
		got, err := ParseMemory(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}

func TestAPIProxyDefaults(t *testing.T) {
	c, err := Load([]byte(`{"apiProxy":{"targets":{"openai":{},"anthropic":{"model":"claude-x","baseUrl":"http://127.0.0.1:9"}}}}`))
	require.NoError(t, err)
	require.NotNil(t, c.APIProxy)
	assert.Equal(t, &APIProxy{
		Targets: map[string]APITarget{
			"openai":    {BaseURL: "https://api.openai.com", APIKeyEnv: "OPENAI_API_KEY"},
			"anthropic": {BaseURL: "http://127.0.0.1:9", APIKeyEnv: "ANTHROPIC_API_KEY", Model: "claude-x"},
		},
		MaxModelRequests: 8, MaxModelTokens: 1024,
		MaxRequestBytes: 4 << 20, MaxResponseBytes: 1 << 20, TimeoutSeconds: 60,
	}, c.APIProxy)
	c, err = Load([]byte(`{}`))
	require.NoError(t, err)
	assert.Nil(t, c.APIProxy, "no apiProxy block means no proxy")
}
