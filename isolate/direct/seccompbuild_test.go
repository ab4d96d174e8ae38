package direct_test

import (
	"testing"

	"github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
)

// TestSeccompBuildTag fails closed in a build without the seccomp tag: Open
// refuses with a message that says how to rebuild. CI runs this test once
// without the tag; with the tag, Open succeeds.
func TestSeccompBuildTag(t *testing.T) {
	rt, err := direct.Open(isolate.HostConfig{RunID: newRunID(), StateDir: t.TempDir()})
	if seccomp.Enabled {
		require.NoError(t, err)
		require.NoError(t, rt.Close())
		return
	}
	require.ErrorIs(t, err, direct.ErrNoSeccompBuild)
	assert.Contains(t, err.Error(), "-tags=seccomp")
}
