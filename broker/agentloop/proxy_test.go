package agentloop

import (
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/apiproxy"
	"github.com/awf-project/awf/tests/fakeprovider"
)

// startProxy serves a real API proxy on loopback in front of fake and
// issues one capability for both protocols.
func startProxy(t *testing.T, fake *fakeprovider.Server, maxTokens, maxRequests int) (string, string) {
	t.Helper()
	p, err := apiproxy.New(apiproxy.Options{
		Targets: []apiproxy.Target{
			{Protocol: apiproxy.OpenAI, BaseURL: fake.URL(), Key: "sk-provider-openai"},
			{Protocol: apiproxy.Anthropic, BaseURL: fake.URL(), Key: "sk-provider-anthropic"},
		},
		Audit:           io.Discard,
		TestOnlyRootCAs: fake.CertPool(),
	})
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.Close() })
	tok, err := p.Issue("inv-1", apiproxy.Limits{
		Models:      map[apiproxy.Protocol]string{apiproxy.OpenAI: testModel, apiproxy.Anthropic: testModel},
		MaxRequests: maxRequests, MaxTokens: maxTokens, MaxRequestBytes: 4 << 20, MaxResponseBytes: 1 << 20,
		Timeout: 10 * time.Second,
	})
	require.NoError(t, err)
	return srv.URL, tok
}
