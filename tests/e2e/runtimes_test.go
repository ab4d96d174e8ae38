package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
)

// TestOneQueryPerRuntime runs one query through awf run with every real
// runtime whose host component exists. sbx is always blocked (preflight).
func TestOneQueryPerRuntime(t *testing.T) {
	for _, rt := range []string{"direct", "gvisor", "docker"} {
		t.Run(rt, func(t *testing.T) {
			before := runDirs()
			b := bq{PrivateRepos: []repo{local("demo/app", "internal")}, Runtime: rt}
			b.DockerSocket = fixture.RequireRuntime(t, rt)
			r := awfRun(t, writeConfig(t, b), agentScript(t, "printf 'import json, os\\njson.dump(os.path.isfile(\"/query/repo/SECURITY.md\"), open(\"/query/out\",\"w\"))\\n' | bounded-query --repo demo/app --schema '{\"type\":\"boolean\"}'\n"))
			require.Equal(t, 0, r.code, r.stderr)
			assert.Equal(t, okTrue+"\n", r.stdout, r.stderr)
			assertNoNewRunDirs(t, before)
		})
	}
}
