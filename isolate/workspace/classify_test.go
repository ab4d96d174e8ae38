package workspace

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/awf-project/awf/isolate"
)

func TestExitOutcome(t *testing.T) {
	cases := []struct {
		code   int
		kind   isolate.Kind
		exit   int
		signal string
	}{
		{0, isolate.KindOK, 0, ""},
		{1, isolate.KindNonzeroExit, 1, ""},
		{128, isolate.KindNonzeroExit, 128, ""},
		{128 + 31, isolate.KindSeccompKill, -1, "SIGSYS"},
		{128 + 25, isolate.KindFileSizeLimit, -1, "SIGXFSZ"},
		{128 + 9, isolate.KindNonzeroExit, -1, "SIGKILL"},
		{128 + 65, isolate.KindNonzeroExit, 128 + 65, ""},
	}
	for _, tc := range cases {
		o := ExitOutcome("test", tc.code)
		assert.Equal(t, tc.kind, o.Kind, "code %d", tc.code)
		assert.Equal(t, tc.exit, o.ExitCode, "code %d", tc.code)
		assert.Equal(t, tc.signal, o.Signal, "code %d", tc.code)
		if tc.kind != isolate.KindOK {
			assert.Contains(t, o.Detail, "test: ", "code %d", tc.code)
		}
	}
}
