package agentloop

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTranscriptScrubsCapability: a string that somehow held the
// capability (a provider echoing it, an error text) is scrubbed.
func TestTranscriptScrubsCapability(t *testing.T) {
	var buf bytes.Buffer
	tr := newTranscript(&buf)
	tr.secret = testCap
	tr.add(map[string]any{"type": "response", "body": `{"echo":"Bearer ` + testCap + `"}`})
	tr.end(Outcome{State: StateProviderError, Detail: "x " + testCap})
	assert.NotContains(t, buf.String(), testCap)
	assert.Contains(t, buf.String(), `Bearer [capability]`)
}
