package isolate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/awf-project/awf/isolate"
)

// TestParent: an empty CgroupParent is the one default every backend,
// verify and awf run share; a named one is kept as it is.
func TestParent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", isolate.DefaultCgroupParent},
		{"awf-test-1", "awf-test-1"},
	} {
		assert.Equal(t, tc.want, isolate.HostConfig{CgroupParent: tc.in}.Parent(), "CgroupParent %q", tc.in)
	}
	assert.Equal(t, "awf", isolate.DefaultCgroupParent, "the operator docs name this parent")
}
