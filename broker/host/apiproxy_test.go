package host

import (
	"net"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/apiproxy"
)

func TestShimArgsAPIProxyPort(t *testing.T) {
	a := ShimArgs{UID: 1, GID: 2, PrivateBase: "/p", IngressBase: "/i", IngressRoot: "/i/r", Network: NetworkNone,
		APIProxyPort: 43210, Cgroups: []string{"/sys/fs/cgroup/a"}}
	v := a.Argv()
	assert.Equal(t, []string{"1", "2", "/p", "/i", "/i/r", "--network=none", "--api-proxy-port=43210", "--cgroup=/sys/fs/cgroup/a"}, v)
	got, err := ParseShimArgs(v)
	require.NoError(t, err)
	assert.Equal(t, a, got)
	base := []string{"1", "2", "/p", "/i", "/i/r"}
	for _, opts := range [][]string{
		{"--api-proxy-port=0"},
		{"--api-proxy-port=65536"},
		{"--api-proxy-port=080"},
		{"--api-proxy-port=+80"},
		{"--api-proxy-port="},
		{"--api-proxy-port=1", "--api-proxy-port=2"},
		{"--api-proxy-port=1", "--network=none"},
		{"--cgroup=/sys/fs/cgroup/a", "--api-proxy-port=1"},
	} {
		_, err := ParseShimArgs(append(append([]string{}, base...), opts...))
		assert.Error(t, err, "%v", opts)
	}
}

// TestHandOffProxyListenerFromEmptyNetns runs the shim's hand-off on a
// thread that has entered a new network namespace: the listener that
// arrives belongs to that namespace (it is unreachable from this one),
// and it accepts what is dialled inside it.
func TestHandOffProxyListenerFromEmptyNetns(t *testing.T) {
	proxyEnd, shimEnd, err := NewAPIProxyHandoff()
	require.NoError(t, err)
	defer proxyEnd.Close()
	const port = 47321
	errc := make(chan error, 1)
	go func() {
		// This thread is never unlocked: it dies with its namespace.
		runtime.LockOSThread()
		if err := enterNetworkNone(); err != nil {
			errc <- err
			return
		}
		errc <- handOffProxyListener(shimEnd, port)
	}()
	require.NoError(t, <-errc)
	l, err := apiproxy.RecvListener(proxyEnd)
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, "127.0.0.1:47321", l.Addr().String())
	// From awf's namespace the port is not the handed-off listener.
	c, err := net.Dial("tcp", "127.0.0.1:47321")
	if err == nil {
		c.Close()
		t.Fatal("the handed-off listener is reachable from the host namespace")
	}
}

func TestAPIProxyEnv(t *testing.T) {
	base := []string{"PATH=/bin", "OPENAI_API_KEY=sk-real", "OPENAI_BASE_URL=https://evil", "ANTHROPIC_API_KEY=sk-ant-real", "HOME=/h"}
	got := APIProxyEnv(base, "127.0.0.1:4000", "awf-cap-x", []apiproxy.Protocol{apiproxy.OpenAI, apiproxy.Anthropic})
	assert.Equal(t, []string{"PATH=/bin", "HOME=/h",
		"OPENAI_BASE_URL=http://127.0.0.1:4000/v1", "OPENAI_API_KEY=awf-cap-x",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:4000", "ANTHROPIC_API_KEY=awf-cap-x"}, got)
	got = APIProxyEnv(base, "127.0.0.1:4000", "awf-cap-x", []apiproxy.Protocol{apiproxy.Anthropic})
	assert.Contains(t, got, "OPENAI_API_KEY=sk-real", "a variable of a protocol the agent gets no capability for is left to AgentEnv's rules")
	assert.Contains(t, got, "ANTHROPIC_API_KEY=awf-cap-x")
}
