package workspace

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordInvocation(t *testing.T) {
	for _, tc := range []struct {
		name, id, want string
		bad            bool
	}{
		{name: "given", id: "inv-1", want: "inv-1"},
		{name: "empty is the sandbox's", id: "", want: "sandbox-sb1"},
		{name: "invalid", id: "../x", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Workspace{Dir: t.TempDir(), Journal: Journal{SandboxID: "sb1"}}
			got, err := w.RecordInvocation(tc.id)
			if tc.bad {
				require.Error(t, err)
				assert.Empty(t, w.Journal.InvocationID, "nothing is recorded")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			j, err := ReadJournal(w.Dir)
			require.NoError(t, err)
			assert.Equal(t, tc.want, j.InvocationID, "the journal on disk names it")
		})
	}
}
