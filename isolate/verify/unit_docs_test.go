package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocsListEveryCheck keeps docs/verify.md in step with the code: every
// probe, runtime check and host check must be explained there.
func TestDocsListEveryCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "verify.md"))
	require.NoError(t, err)
	doc := string(b)
	for _, p := range append(Battery(), filterProbe) {
		assert.Contains(t, doc, "`"+p.ID+"`", "docs/verify.md must explain probe %s", p.ID)
	}
	for _, id := range RuntimeChecks() {
		assert.Contains(t, doc, "`"+id+"`", "docs/verify.md must explain %s", id)
	}
	for _, id := range []string{"host/kernel", "host/cgroup", "host/overlayfs", "host/seccomp", "host/openat2", "host/userns", "host/runsc", "host/docker", "hazard/docker-sock", "hazard/token-env", "hazard/private-root", "host/cpu-split"} {
		assert.Contains(t, doc, "`"+id+"`", "docs/verify.md must explain %s", id)
	}
}
