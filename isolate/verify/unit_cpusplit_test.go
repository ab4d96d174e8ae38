package verify

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckCPUSplit(t *testing.T) {
	cases := []struct {
		ncpu             int
		allowed, sandbox string
		want             Status
		evidence         string
	}{
		{1, "0", "", Warn, "one CPU (0)"},
		{2, "0-1", "", Fail, "no CPU split"},
		{2, "0-1", "1", Pass, "sandboxes and the broker on CPUs 1, the agent on the rest of 0-1"},
		{8, "0-7", "6-7", Pass, "CPUs 6-7"},
	}
	for _, tc := range cases {
		r := checkCPUSplit(tc.ncpu, tc.allowed, tc.sandbox)
		assert.Equal(t, "host/cpu-split", r.ID)
		assert.Equal(t, tc.want, r.Status, "%+v", tc)
		assert.Contains(t, r.Evidence, tc.evidence)
	}
}
