package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifyRuntimes(t *testing.T) {
	cases := []struct {
		rts, req        []string
		names, required []string
		wantErr         bool
	}{
		{nil, nil, []string{"direct"}, []string{"direct"}, false},
		{[]string{"all"}, nil, []string{"direct", "gvisor", "docker", "sbx"}, nil, false},
		{[]string{"all"}, []string{"gvisor"}, []string{"direct", "gvisor", "docker", "sbx"}, []string{"gvisor"}, false},
		{[]string{"gvisor", "direct"}, nil, []string{"gvisor", "direct"}, []string{"gvisor", "direct"}, false},
		{[]string{"direct"}, []string{"docker"}, []string{"direct", "docker"}, []string{"direct", "docker"}, false},
		{[]string{"vm"}, nil, nil, nil, true},
		{nil, []string{"vm"}, nil, nil, true},
	}
	for _, tc := range cases {
		names, required, err := verifyRuntimes(tc.rts, tc.req)
		if tc.wantErr {
			assert.Error(t, err, "%v %v", tc.rts, tc.req)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.names, names, "%v %v", tc.rts, tc.req)
		assert.Equal(t, tc.required, required, "%v %v", tc.rts, tc.req)
	}
}

func TestListFlag(t *testing.T) {
	var l listFlag
	require.NoError(t, l.Set("direct, gvisor"))
	require.NoError(t, l.Set("docker"))
	assert.Equal(t, listFlag{"direct", "gvisor", "docker"}, l)
	assert.Equal(t, "direct,gvisor,docker", l.String())
}

func TestVerifyAndMatrixUsage(t *testing.T) {
	for _, args := range [][]string{
		{"isolate", "verify", "--runtime", "vm"},
		{"isolate", "verify", "extra"},
		{"isolate", "matrix", "--require", "vm/direct"},
		{"isolate", "matrix", "extra"},
	} {
		var out, errb bytes.Buffer
		code := realMain(args, strings.NewReader(""), &out, &errb)
		assert.Equal(t, 2, code, "%v: %s", args, errb.String())
	}
}

func TestSpreadValues(t *testing.T) {
	cases := []struct {
		in, want []string
	}{
		{[]string{"--require", "direct", "gvisor", "docker", "--json"}, []string{"--require", "direct", "--require", "gvisor", "--require", "docker", "--json"}},
		{[]string{"--runtime=all", "sbx", "--require", "direct"}, []string{"--runtime=all", "--runtime", "sbx", "--require", "direct"}},
		{[]string{"--json", "extra"}, []string{"--json", "extra"}},
		{[]string{"--require", "direct", "--", "x"}, []string{"--require", "direct", "--", "x"}},
		{[]string{"--docker-socket", "/s", "direct"}, []string{"--docker-socket", "/s", "direct"}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, spreadValues(tc.in, "runtime", "require"), "%q", tc.in)
	}
}
