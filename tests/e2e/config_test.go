package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigCommands: awf config schema prints the published schema, and
// awf config validate accepts and rejects files and stdin as awf run does.
func TestConfigCommands(t *testing.T) {
	out, err := exec.Command(awfBin, "config", "schema").Output()
	require.NoError(t, err)
	published, err := os.ReadFile("../../docs/awf-config.schema.json")
	require.NoError(t, err)
	assert.Equal(t, string(published), string(out))

	validate := func(doc string) (int, string, string) {
		cmd := exec.Command(awfBin, "config", "validate", "-")
		// validate also makes awf run's checks: the documents below, staged
		// from GitHub with no agent.user, need a staging credential and an
		// agent user from sudo.
		cmd.Env = append(os.Environ(), "GH_TOKEN=e2e-not-a-token", "SUDO_UID=65534", "SUDO_GID=65534")
		cmd.Stdin = strings.NewReader(doc)
		r := runCmd(t, cmd)
		return r.code, r.stdout, r.stderr
	}
	code, o, _ := validate(`{"boundedQueries":{"enabled":true,"privateRepos":[{"repo":"o/r","sensitivity":"confidential"}],"runtime":"gvisor"}}`)
	assert.Equal(t, 0, code)
	assert.Contains(t, o, "runtime gvisor, 1 repositories")
	code, _, e := validate(`{"boundedQueries":{"enabled":true,"privateRepos":["o/r"]}}`)
	assert.Equal(t, 0, code)
	assert.Contains(t, e, "deprecated")
	code, _, e = validate(`{"boundedQueries":{"enabled":true,"privateRepos":["o/r","O/R"]}}`)
	assert.Equal(t, 1, code)
	assert.Contains(t, e, "case-insensitively")
	code, _, e = validate(`{"boundedQueries":{"enabled":true}}`)
	assert.Equal(t, 1, code)
	assert.Contains(t, e, "boundedQueries.privateRepos: is required when enabled is true")
}
