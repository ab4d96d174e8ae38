package client_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/broker/client/clienttest"
)

// TestParseArgsRefuses walks the vectors the CLIs' own tests send through
// the built binaries (clienttest.RefusedArgs).
func TestParseArgsRefuses(t *testing.T) {
	for name, argv := range clienttest.RefusedArgs(`{"type":"boolean"}`) {
		_, err := client.ParseArgs(argv)
		assert.Error(t, err, name)
	}
}
