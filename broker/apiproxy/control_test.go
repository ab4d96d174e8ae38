package apiproxy

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/tests/fakeprovider"
)

func enclaveLimits() Limits {
	l := defaultLimits()
	l.Models = map[Protocol]string{OpenAI: openAIModel}
	l.MaxRequests, l.MaxTokens = 8, 1024
	return l
}

// controlRig serves a control channel in-process in front of a rig.
func controlRig(t *testing.T, served chan<- net.Listener) (*rig, *Control) {
	t.Helper()
	r := newRig(t)
	proxyEnd, brokerEnd, err := NewControlPair()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveControl(ctx, proxyEnd, r.proxy, enclaveLimits(), func(l net.Listener) {
			if served != nil {
				served <- l
			} else {
				l.Close()
			}
		})
	}()
	c, err := NewControl(brokerEnd)
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		cancel()
		<-done
	})
	return r, c
}

func TestControlIssuesAndRevokesEnclaveCapabilities(t *testing.T) {
	r, c := controlRig(t, nil)
	ctx := context.Background()
	tok, err := c.Issue(ctx, "enclave-0123456789abcdef01234567", 2, 100)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tok, capabilityPrefix))
	capa, ref := r.proxy.caps.authenticate(tok)
	require.Nil(t, ref)
	assert.Equal(t, "enclave-0123456789abcdef01234567", capa.caller)
	assert.Equal(t, 2, capa.limits.MaxRequests)
	assert.Equal(t, 100, capa.limits.MaxTokens)
	assert.Equal(t, map[Protocol]string{OpenAI: openAIModel}, capa.limits.Models, "the enclave's model, fixed at start")

	require.NoError(t, c.Revoke(ctx, tok))
	_, ref = r.proxy.caps.authenticate(tok)
	require.NotNil(t, ref)
	assert.Equal(t, CodeCapabilityRevoked, ref.Code)
	assert.Error(t, c.Revoke(ctx, tok), "a second revoke is refused")

	// Two invocations get two distinct capabilities.
	a, err := c.Issue(ctx, "enclave-aa", 1, 1)
	require.NoError(t, err)
	b, err := c.Issue(ctx, "enclave-bb", 1, 1)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
}

func TestControlRefusesWhatIsNotAnEnclaves(t *testing.T) {
	r, c := controlRig(t, nil)
	ctx := context.Background()
	agentTok := r.issue(t, defaultLimits())
	for name, f := range map[string]func() error{
		"agent caller":      func() error { _, err := c.Issue(ctx, CallerAgent, 1, 1); return err },
		"other caller":      func() error { _, err := c.Issue(ctx, "enclave-XYZ", 1, 1); return err },
		"too many requests": func() error { _, err := c.Issue(ctx, "enclave-aa", 9, 1); return err },
		"too many tokens":   func() error { _, err := c.Issue(ctx, "enclave-aa", 1, 1025); return err },
		"zero requests":     func() error { _, err := c.Issue(ctx, "enclave-aa", 0, 1); return err },
		"revoke the agent":  func() error { return c.Revoke(ctx, agentTok) },
		"revoke garbage":    func() error { return c.Revoke(ctx, "awf-cap-00") },
	} {
		assert.Error(t, f(), name)
	}
	_, ref := r.proxy.caps.authenticate(agentTok)
	assert.Nil(t, ref, "the agent's capability is not the control channel's to end")

	// Raw malformed requests get a refusal, and the channel keeps serving.
	for _, msg := range []string{`{"op":"issue","caller":"enclave-aa","maxRequests":1,"maxTokens":1,"models":{"openai":"x"}}`, `{"op":"shell"}`, `not json`, `{"op":"revoke"} {}`} {
		c.mu.Lock()
		_, _, err := c.c.WriteMsgUnix([]byte(msg), nil, nil)
		require.NoError(t, err)
		buf := make([]byte, 4096)
		n, _, _, _, err := c.c.ReadMsgUnix(buf, nil)
		c.mu.Unlock()
		require.NoError(t, err)
		assert.Contains(t, string(buf[:n]), `"ok":false`, msg)
	}
	_, err := c.Issue(ctx, "enclave-cc", 1, 1)
	assert.NoError(t, err)
}

func TestControlListenAcceptsOnlyLocalTCP(t *testing.T) {
	served := make(chan net.Listener, 4)
	_, c := controlRig(t, served)
	ctx := context.Background()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer l.Close()
	id, err := c.Listen(ctx, l)
	require.NoError(t, err)
	got := <-served
	assert.Equal(t, l.Addr().String(), got.Addr().String())
	require.NoError(t, c.Unlisten(ctx, id))
	_, err = got.Accept()
	assert.ErrorIs(t, err, http.ErrServerClosed, "unlisten closed the proxy's copy")
	assert.Error(t, c.Unlisten(ctx, id), "twice")
	assert.Error(t, c.Unlisten(ctx, "listener-99"))

	any4, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4zero})
	require.NoError(t, err)
	defer any4.Close()
	_, err = c.Listen(ctx, any4)
	assert.Error(t, err, "an unspecified address reaches every interface")
	assert.Empty(t, served)
}

// TestProcessControlChannel runs the proxy process with a control channel:
// an enclave capability issued over it works through the enclave-side
// listener handed over it, within its own request cap, and is refused
// once revoked.
func TestProcessControlChannel(t *testing.T) {
	fake := fakeprovider.New(t, fakeprovider.Turn{Kind: fakeprovider.Finish}, fakeprovider.Turn{Kind: fakeprovider.Finish})
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, fake.CertPEM(), 0o644))
	t.Setenv("SSL_CERT_FILE", ca)
	lim := enclaveLimits()
	spec := Spec{Listen: "127.0.0.1:0", AuditPath: filepath.Join(dir, AuditFile), Control: true, Enclave: &lim, User: testUser(t),
		Targets: []SpecTarget{{Protocol: OpenAI, BaseURL: fake.URL()}}}
	specPath := filepath.Join(dir, "api-proxy.json")
	require.NoError(t, WriteSpec(specPath, spec))
	proxyEnd, brokerEnd, err := NewControlPair()
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	p, err := StartWithControl(context.Background(), exe, specPath, map[Protocol]string{OpenAI: openAIKey}, nil, proxyEnd, os.Stderr)
	proxyEnd.Close()
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	assert.Empty(t, p.AgentToken, "no agent capability in this spec")
	c, err := NewControl(brokerEnd)
	require.NoError(t, err)
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	addr := l.Addr().String()
	lid, err := c.Listen(ctx, l)
	require.NoError(t, err)
	l.Close()

	tok, err := c.Issue(ctx, "enclave-0123456789abcdef01234567", 1, 100)
	require.NoError(t, err)
	st, b := post(t, "http://"+addr+OpenAI.Path(), tok, fakeprovider.OpenAIRequest(openAIModel, 10))
	require.Equal(t, http.StatusOK, st, string(b))
	st, b = post(t, "http://"+addr+OpenAI.Path(), tok, fakeprovider.OpenAIRequest(openAIModel, 10))
	assert.Equal(t, http.StatusForbidden, st, "one request per this capability: %s", b)
	st, _ = post(t, "http://"+addr+OpenAI.Path(), tok, fakeprovider.OpenAIRequest(openAIModel, 101))
	assert.NotEqual(t, http.StatusOK, st)

	tok2, err := c.Issue(ctx, "enclave-00", 4, 100)
	require.NoError(t, err)
	require.NoError(t, c.Revoke(ctx, tok2))
	st, b = post(t, "http://"+addr+OpenAI.Path(), tok2, fakeprovider.OpenAIRequest(openAIModel, 10))
	assert.Equal(t, http.StatusUnauthorized, st)
	assert.Equal(t, string(CodeCapabilityRevoked), errorCode(t, b))
	assert.Equal(t, 1, fake.Count(), "only the one allowed request went upstream")

	// Once unlistened, the enclave-side listener is gone from the proxy.
	require.NoError(t, c.Unlisten(ctx, lid))
	_, err = net.DialTimeout("tcp", addr, 2*time.Second)
	assert.Error(t, err, "the proxy still listens on a torn-down enclave's link")

	raw, err := os.ReadFile(spec.AuditPath)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"caller":"enclave-0123456789abcdef01234567"`)
	assert.NotContains(t, string(raw), tok)
}

func TestControlPairIsSeqpacket(t *testing.T) {
	a, b, err := NewControlPair()
	require.NoError(t, err)
	defer a.Close()
	defer b.Close()
	typ, err := unix.GetsockoptInt(int(a.Fd()), unix.SOL_SOCKET, unix.SO_TYPE)
	require.NoError(t, err)
	assert.Equal(t, unix.SOCK_SEQPACKET, typ)
}
