package isolate_test

import (
	"net/netip"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// TestDescribeNetwork: a template with a network joins that namespace (its
// path in the one network namespace entry) and names its one peer; without
// one the sandbox gets a new empty namespace; a network and the NoNetNS
// weakening, or a network without a path or peer, are refused.
func TestDescribeNetwork(t *testing.T) {
	peer := netip.MustParseAddrPort("169.254.77.1:8080")
	netNS := func(d *specs.Spec) []specs.LinuxNamespace {
		var out []specs.LinuxNamespace
		for _, n := range d.Linux.Namespaces {
			if n.Type == specs.NetworkNamespace {
				out = append(out, n)
			}
		}
		return out
	}
	tpl := template(t)
	d := describe(t, tpl)
	assert.Equal(t, []specs.LinuxNamespace{{Type: specs.NetworkNamespace}}, netNS(d))
	assert.NotContains(t, d.Annotations, isolate.AnnotationNetworkPeer)

	tpl.Network = &isolate.Network{NetNS: "/run/netns/awfenc-x-e", Peer: peer}
	d = describe(t, tpl)
	assert.Equal(t, []specs.LinuxNamespace{{Type: specs.NetworkNamespace, Path: "/run/netns/awfenc-x-e"}}, netNS(d))
	assert.Equal(t, "169.254.77.1:8080", d.Annotations[isolate.AnnotationNetworkPeer])

	for name, n := range map[string]isolate.Network{
		"relative path": {NetNS: "netns/x", Peer: peer},
		"no peer":       {NetNS: "/run/netns/x"},
	} {
		tpl := template(t)
		tpl.Network = &n
		_, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
		require.Error(t, err, name)
	}
	tpl = template(t)
	tpl.Network = &isolate.Network{NetNS: "/run/netns/x", Peer: peer}
	tpl.Weaken.NoNetNS = true
	_, err := isolate.Describe(tpl, isolate.Job{}, isolate.HostConfig{})
	require.Error(t, err)
}
