package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeCases: the loader and the JSON Schema accept and refuse the same
// sealedProbes documents.
var probeCases = []schemaCase{
	{"seed example", `{"sealedProbes":{"enabled":true,"privateRepos":["lpcox/foo","lpcox/bar"],"runtime":"gvisor","timeout":30,"memoryLimit":"512m","interpreter":"python3","maxInvocations":32}}`, true},
	{"absent fields disabled", `{"sealedProbes":{}}`, true},
	{"disabled with repos", `{"sealedProbes":{"enabled":false,"privateRepos":["o/r"]}}`, true},
	{"enabled no repos", `{"sealedProbes":{"enabled":true}}`, false},
	{"enabled empty repos", `{"sealedProbes":{"enabled":true,"privateRepos":[]}}`, false},
	{"object repo", `{"sealedProbes":{"enabled":true,"privateRepos":[{"repo":"o/r","source":"/srv/git/r","ref":"main"}]}}`, true},
	{"object repo bare", `{"sealedProbes":{"enabled":true,"privateRepos":[{"repo":"o/r"}]}}`, true},
	{"object repo sensitivity", `{"sealedProbes":{"privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}}`, false},
	{"object repo extra", `{"sealedProbes":{"privateRepos":[{"repo":"o/r","image":"x"}]}}`, false},
	{"object no repo", `{"sealedProbes":{"privateRepos":[{"source":"/srv/r"}]}}`, false},
	{"duplicate", `{"sealedProbes":{"privateRepos":["o/r","o/r"]}}`, false},
	{"duplicate case", `{"sealedProbes":{"privateRepos":["O/R",{"repo":"o/r"}]}}`, false},
	{"url", `{"sealedProbes":{"privateRepos":["https://github.com/o/r"]}}`, false},
	{"credentials", `{"sealedProbes":{"privateRepos":["user:pw@o/r"]}}`, false},
	{"wildcard", `{"sealedProbes":{"privateRepos":["o/*"]}}`, false},
	{"query", `{"sealedProbes":{"privateRepos":["o/r?x=1"]}}`, false},
	{"fragment", `{"sealedProbes":{"privateRepos":["o/r#x"]}}`, false},
	{"traversal", `{"sealedProbes":{"privateRepos":["o/.."]}}`, false},
	{"traversal inside", `{"sealedProbes":{"privateRepos":["../o/r"]}}`, false},
	{"extra segment", `{"sealedProbes":{"privateRepos":["o/r/x"]}}`, false},
	{"source relative", `{"sealedProbes":{"privateRepos":[{"repo":"o/r","source":"srv/r"}]}}`, false},
	{"ref option", `{"sealedProbes":{"privateRepos":[{"repo":"o/r","ref":"--upload-pack=x"}]}}`, false},
	{"runtime direct", `{"sealedProbes":{"runtime":"direct"}}`, true},
	{"runtime docker", `{"sealedProbes":{"runtime":"docker"}}`, true},
	{"runtime sbx", `{"sealedProbes":{"runtime":"sbx"}}`, true},
	{"runtime other", `{"sealedProbes":{"runtime":"podman"}}`, false},
	{"timeout zero", `{"sealedProbes":{"timeout":0}}`, false},
	{"timeout unbounded", `{"sealedProbes":{"timeout":541}}`, false},
	{"timeout fraction", `{"sealedProbes":{"timeout":1.5}}`, false},
	{"memory bad", `{"sealedProbes":{"memoryLimit":"lots"}}`, false},
	{"memory small", `{"sealedProbes":{"memoryLimit":"8m"}}`, false},
	{"interpreter other", `{"sealedProbes":{"interpreter":"node"}}`, false},
	{"max invocations zero", `{"sealedProbes":{"maxInvocations":0}}`, false},
	{"max invocations unbounded", `{"sealedProbes":{"maxInvocations":10001}}`, false},
	{"max invocations negative", `{"sealedProbes":{"maxInvocations":-1}}`, false},
	{"launch control", `{"sealedProbes":{"image":"python:3"}}`, false},
	{"credentials key", `{"sealedProbes":{"token":"x"}}`, false},
	{"not an object", `{"sealedProbes":true}`, false},
	{"enabled string", `{"sealedProbes":{"enabled":"yes","privateRepos":["o/r"]}}`, false},
}

func TestProbeConfigLoaderAndSchemaAgree(t *testing.T) {
	assertLoaderAndSchemaAgree(t, probeCases)
}

// TestProbeConfigAbsentIsDisabled: no block, or a disabled one, loads to
// the disabled defaults and leaves every other block as it was.
func TestProbeConfigAbsentIsDisabled(t *testing.T) {
	base := `"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/r","sensitivity":"internal"}]}`
	without, err := Load([]byte(`{` + base + `}`))
	require.NoError(t, err)
	disabled, err := Load([]byte(`{` + base + `,"sealedProbes":{"enabled":false,"privateRepos":["o/p"]}}`))
	require.NoError(t, err)
	assert.False(t, without.SealedProbes.Enabled)
	assert.Equal(t, DefaultSealedProbes(), without.SealedProbes)
	assert.False(t, disabled.SealedProbes.Enabled)
	assert.Equal(t, without.BoundedQueries, disabled.BoundedQueries)
	assert.Equal(t, without.Agent, disabled.Agent)
}

func TestProbeConfigValues(t *testing.T) {
	c, err := Load([]byte(`{"sealedProbes":{"enabled":true,"privateRepos":["Lpcox/Foo",{"repo":"o/r","source":"/srv/r","ref":"v1"}],"runtime":"gvisor","timeout":45,"memoryLimit":"1g","maxInvocations":5}}`))
	require.NoError(t, err)
	p := c.SealedProbes
	assert.True(t, p.Enabled)
	assert.Equal(t, []Repo{{Repo: "Lpcox/Foo"}, {Repo: "o/r", Source: "/srv/r", Ref: "v1"}}, p.PrivateRepos)
	assert.Equal(t, "gvisor", p.Runtime)
	assert.Equal(t, 45, p.TimeoutSeconds)
	assert.Equal(t, int64(1<<30), p.MemoryBytes)
	assert.Equal(t, "python3", p.Interpreter)
	assert.Equal(t, 5, p.MaxInvocations)
	assert.Empty(t, c.Warnings, "bare strings are the seed's form for probes, not deprecated")

	_, err = Load([]byte(`{"sealedProbes":{"privateRepos":[{"repo":"o/r","sensitivity":"public"}]}}`))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "sealedProbes.privateRepos[0].sensitivity"), err.Error())
}

// TestProbeConfigFileAndStdin: the block loads the same from a file and from
// stdin (--config -).
func TestProbeConfigFileAndStdin(t *testing.T) {
	doc := `{"sealedProbes":{"enabled":true,"privateRepos":["lpcox/foo"],"runtime":"gvisor","maxInvocations":4}}`
	path := filepath.Join(t.TempDir(), "awf.json")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	fromFile, err := LoadFile(path, nil)
	require.NoError(t, err)
	fromStdin, err := LoadFile("-", strings.NewReader(doc))
	require.NoError(t, err)
	assert.Equal(t, fromFile.SealedProbes, fromStdin.SealedProbes)
	assert.True(t, fromStdin.SealedProbes.Enabled)
}
