package workspace

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidID(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"0123456789abcdef0123456789abcdef", true},
		{"cli", true},
		{"vabc123-001", true},
		{"Run_1.x", true},
		{"", false},
		{".", false},
		{"..", false},
		{"-x", false},
		{"a/b", false},
		{"a b", false},
		{"a\x00b", false},
		{string(make([]byte, 65)), false},
	} {
		err := ValidID("run", c.id)
		assert.Equal(t, c.ok, err == nil, "%q: %v", c.id, err)
	}
}

func TestCaptureKeepsOnlyMax(t *testing.T) {
	c := &Capture{Max: 4}
	n, err := c.Write([]byte("abc"))
	assert.NoError(t, err)
	assert.Equal(t, 3, n)
	n, err = c.Write([]byte("defg"))
	assert.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Equal(t, []byte("abcd"), c.Bytes())
}
