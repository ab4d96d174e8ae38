package docker

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// TestEnclaveNetworkIsBlocked: the Engine cannot join a namespace path, so
// a template with a network is refused with BLOCKED and the reason, never
// rendered as NetworkMode none (which would drop the one peer silently).
func TestEnclaveNetworkIsBlocked(t *testing.T) {
	tpl := isolate.Template{RunID: "net", RootFS: "/root", Limits: isolate.DefaultLimits(), Policy: isolatetest.Policy(t),
		Network: &isolate.Network{NetNS: "/run/netns/awfenc-x-e", Peer: netip.MustParseAddrPort("169.254.77.1:8080")}}
	d, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
	require.NoError(t, err)
	_, err = buildCreate(containerSpec{desc: d, image: "img", seccomp: "seccomp=x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BLOCKED")
	assert.Contains(t, err.Error(), "NetworkMode")
}
