package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A DOCKER_HOST that names no local Unix socket is refused by name, not
// silently replaced by the default socket.
func TestMatrixRefusesRemoteDockerHost(t *testing.T) {
	for _, h := range []string{"tcp://127.0.0.1:2375", "ssh://me@localhost", "unix://relative.sock"} {
		t.Run(h, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", h)
			rc, out, errOut := runAWF(t, "", "isolate", "matrix")
			assert.Equal(t, 2, rc)
			assert.Empty(t, out)
			assert.Contains(t, errOut, "DOCKER_HOST="+h)
		})
	}
}
