// Package proxied fronts a fake provider with the real API proxy, for tests
// of callers that must talk to the proxy as an enclave does. It lives under
// tests/ (a fixture any test may import) so that packages below the broker
// in the README's layering, such as the enclave loop, can be tested against
// the real proxy without importing it themselves.
package proxied

import (
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker/apiproxy"
	"github.com/awf-project/awf/tests/fakeprovider"
)

// Start serves a real API proxy on loopback in front of fake and issues one
// capability for both protocols with the given model and caps. It returns
// the proxy's base URL and the capability; both are closed at cleanup.
func Start(t *testing.T, fake *fakeprovider.Server, model string, maxTokens, maxRequests int) (string, string) {
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
		Models:      map[apiproxy.Protocol]string{apiproxy.OpenAI: model, apiproxy.Anthropic: model},
		MaxRequests: maxRequests, MaxTokens: maxTokens, MaxRequestBytes: 4 << 20, MaxResponseBytes: 1 << 20,
		Timeout: 10 * time.Second,
	})
	require.NoError(t, err)
	return srv.URL, tok
}
