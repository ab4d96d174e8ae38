package agentloop

import (
	"testing"

	"github.com/awf-project/awf/tests/fakeprovider"
	"github.com/awf-project/awf/tests/fakeprovider/proxied"
)

// startProxy serves a real API proxy on loopback in front of fake and
// issues one capability for both protocols.
func startProxy(t *testing.T, fake *fakeprovider.Server, maxTokens, maxRequests int) (string, string) {
	t.Helper()
	return proxied.Start(t, fake, testModel, maxTokens, maxRequests)
}
