package host

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/awf-project/awf/broker/apiproxy"
	"golang.org/x/sys/unix"
)

// shimHandoffFD is the shim's inherited end of the API proxy hand-off
// socket (RunAgent passes ShimArgs.APIProxyHandoff first in ExtraFiles).
const shimHandoffFD = 3

// handOffProxyListener runs in the shim on its locked thread, after it has
// entered the agent's empty network namespace: it listens on
// 127.0.0.1:port there (loopback is the namespace's only link) and sends
// the listener over h (the shim's fd 3) to the API proxy, which stays in
// awf's namespace for its upstream egress. It closes h and keeps no copy
// of the listener, so the agent, started after it, inherits neither.
func handOffProxyListener(h *os.File, port int) error {
	defer h.Close()
	fi, err := h.Stat()
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("agent shim: api proxy hand-off: fd %d is not a socket", h.Fd())
	}
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		return fmt.Errorf("agent shim: api proxy listener: %w", err)
	}
	defer l.Close()
	return apiproxy.SendListener(h, l)
}

// NewAPIProxyHandoff returns the two ends of a hand-off socket: the proxy's
// (Spec.Handoff, apiproxy.Start) and the shim's (ShimArgs.APIProxyHandoff).
func NewAPIProxyHandoff() (proxyEnd, shimEnd *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("api proxy hand-off: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "api-proxy-handoff"), os.NewFile(uintptr(fds[1]), "api-proxy-handoff-shim"), nil
}

// APIProxyEnv returns env with the agent's model SDK variables pointing at
// the proxy at addr (host:port as the agent reaches it) and the agent's
// capability as each API key: OPENAI_BASE_URL (with /v1, as the OpenAI SDKs
// expect) and OPENAI_API_KEY for an openai target, ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY for an anthropic one. Any earlier value of those
// variables is dropped, so the real key never reaches the agent this way.
func APIProxyEnv(env []string, addr, capability string, protocols []apiproxy.Protocol) []string {
	set := map[string]string{}
	for _, p := range protocols {
		switch p {
		case apiproxy.OpenAI:
			set["OPENAI_BASE_URL"] = "http://" + addr + "/v1"
			set["OPENAI_API_KEY"] = capability
		case apiproxy.Anthropic:
			set["ANTHROPIC_BASE_URL"] = "http://" + addr
			set["ANTHROPIC_API_KEY"] = capability
		}
	}
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"} {
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}
