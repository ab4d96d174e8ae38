package hostview

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecurityDocListsTheEntries keeps docs/security.md's table of host-wide
// kernel files identical to the list: the list is the one owner, and the
// page renders it.
func TestSecurityDocListsTheEntries(t *testing.T) {
	b, err := os.ReadFile("../../docs/security.md")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(b), Describe()),
		"docs/security.md must hold hostview.Describe() verbatim; regenerate its table from the list")
}
