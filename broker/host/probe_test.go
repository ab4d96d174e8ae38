package host

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/config"
	"github.com/awf-project/awf/proto"
)

func loadConfig(t *testing.T, doc string) *config.Config {
	t.Helper()
	c, err := config.Load([]byte(doc))
	require.NoError(t, err)
	return c
}

// TestProbeOnlyFrame: only sealed probes enabled makes a run of their
// repositories (all sealed), runtime and limits, with the query block's host
// settings; bounded queries enabled keeps their block; neither stays off.
func TestProbeOnlyFrame(t *testing.T) {
	c := loadConfig(t, `{"boundedQueries":{"runscPath":"/opt/runsc"},"sealedProbes":{"enabled":true,"privateRepos":["o/a",{"repo":"o/b","source":"/srv/b"}],"runtime":"gvisor","timeout":7,"memoryLimit":"64m","maxInvocations":3}}`)
	f, only := probeOnlyFrame(c)
	require.True(t, only)
	assert.True(t, f.Enabled)
	assert.Equal(t, "gvisor", f.Runtime)
	assert.Equal(t, "/opt/runsc", f.RunscPath)
	assert.Equal(t, 7, f.TimeoutSeconds)
	assert.Equal(t, int64(64<<20), f.MemoryBytes)
	assert.Equal(t, 3, f.MaxInvocations)
	assert.Equal(t, []config.Repo{{Repo: "o/a", Sensitivity: proto.SensitivitySealed}, {Repo: "o/b", Sensitivity: proto.SensitivitySealed, Source: "/srv/b"}}, f.PrivateRepos)

	both := loadConfig(t, `{"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/q","sensitivity":"internal"}]},"sealedProbes":{"enabled":true,"privateRepos":["o/a"]}}`)
	f, only = probeOnlyFrame(both)
	assert.False(t, only)
	assert.Equal(t, both.BoundedQueries, f)

	off := loadConfig(t, `{"sealedProbes":{"enabled":false,"privateRepos":["o/a"]}}`)
	f, only = probeOnlyFrame(off)
	assert.False(t, only)
	assert.False(t, f.Enabled)
}

// TestProbeAgentEnv: the probe variables reach the agent only when probes
// run, and then replace any inherited ones; a probe-only run has no query
// variable.
func TestProbeAgentEnv(t *testing.T) {
	l := NewLayout(NewRunID(), "/p", "/i", "/a")
	base := []string{"PATH=/bin", proto.ProbeSocketEnv + "=/tmp/stale.sock", "LANG=C"}
	names := func(env []string) map[string]string {
		m := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}

	plain := names(AgentEnv(base, &Run{Layout: l, Repos: []string{"o/q"}}))
	assert.Equal(t, "/tmp/stale.sock", plain[proto.ProbeSocketEnv], "disabled: nothing changes")
	assert.NotContains(t, plain, "AWF_SEALED_PROBE_SKILL")
	assert.Equal(t, l.Socket, plain[proto.QuerySocketEnv])

	p := probePaths(l)
	beside := names(AgentEnv(base, &Run{Layout: l, Repos: []string{"o/q"}, ProbeRepos: []string{"o/a"}, Spec: Spec{Probe: &p}}))
	assert.Equal(t, p.Socket, beside[proto.ProbeSocketEnv])
	assert.Equal(t, p.SkillPath, beside["AWF_SEALED_PROBE_SKILL"])
	assert.Equal(t, "o/a", beside["AWF_SEALED_PROBE_REPOS"])
	assert.Equal(t, l.Socket, beside[proto.QuerySocketEnv])
	assert.NotEqual(t, l.Socket, p.Socket)

	only := names(AgentEnv(base, &Run{Layout: l, Repos: []string{"o/a"}, Spec: Spec{Kind: KindProbe}}))
	assert.Equal(t, l.Socket, only[proto.ProbeSocketEnv])
	assert.Equal(t, "o/a", only["AWF_SEALED_PROBE_REPOS"])
	for k := range only {
		assert.False(t, strings.HasPrefix(k, "AWF_BOUNDED_QUERY_"), k)
	}
	assert.Equal(t, ProbeAuditFile, AuditFile(Spec{Kind: KindProbe}))
	assert.Equal(t, "bounded-query.jsonl", AuditFile(Spec{}))
}
