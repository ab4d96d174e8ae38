package e2e

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOneQueryPerRuntime runs one query through awf run with every real
// runtime whose host component exists. sbx is always blocked (preflight).
func TestOneQueryPerRuntime(t *testing.T) {
	for _, rt := range []string{"direct", "gvisor", "docker"} {
		t.Run(rt, func(t *testing.T) {
			before := runDirs()
			b := bq{PrivateRepos: []repo{local("demo/app", "internal")}, Runtime: rt}
			switch rt {
			case "gvisor":
				if _, err := exec.LookPath("runsc"); err != nil {
					t.Skip("BLOCKED: runsc is not installed on this host; the gvisor runtime cannot be exercised")
				}
			case "docker":
				if _, err := exec.LookPath("dockerd"); err != nil {
					t.Skip("BLOCKED: dockerd is not installed on this host; the docker runtime cannot be exercised")
				}
				// The engine is installed, so a missing daemon is a set-up fault, not an absent component.
				sock := os.Getenv("AWF_TEST_DOCKER_SOCKET")
				fi, err := os.Stat(sock)
				require.True(t, sock != "" && err == nil && fi.Mode()&os.ModeSocket != 0,
					"no Docker daemon at AWF_TEST_DOCKER_SOCKET=%q: start one with tests/setup/dockerd.sh start (make test does)", sock)
				b.DockerSocket = sock
			}
			r := awfRun(t, writeConfig(t, b), agentScript(t, "printf 'import json, os\\njson.dump(os.path.isfile(\"/query/repo/SECURITY.md\"), open(\"/query/out\",\"w\"))\\n' | bounded-query --repo demo/app --schema '{\"type\":\"boolean\"}'\n"))
			require.Equal(t, 0, r.code, r.stderr)
			assert.Equal(t, okTrue+"\n", r.stdout, r.stderr)
			assertNoNewRunDirs(t, before)
		})
	}
}
