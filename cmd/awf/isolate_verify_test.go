package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate/verify"
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
		{"isolate", "matrix", "--require-enclave", "vm/direct"},
		{"isolate", "matrix", "--require-enclave", "host"},
		{"isolate", "matrix", "--enclave-probe", "/x"},
	} {
		var out, errb bytes.Buffer
		code := realMain(args, strings.NewReader(""), &out, &errb)
		assert.Equal(t, 2, code, "%v: %s", args, errb.String())
	}
}

// TestMatrixEnclaveCells runs the matrix on this host: the enclave table
// follows the query table in text and JSON, the docker enclave cells are
// BLOCKED with the Engine's missing control, and --require-enclave exits 1
// with each unmet pair while a SUPPORTED awf pair (host/direct) exits 0.
func TestMatrixEnclaveCells(t *testing.T) {
	rc, out, errOut := runAWF(t, "", "isolate", "matrix", "--require-enclave", "host/direct")
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "\nPrimary agent  Docker enclave  gVisor enclave  sbx enclave\n")
	assert.Contains(t, out, "awf's own enclave cells")
	assert.Regexp(t, `(?m)^host/direct +SUPPORTED `, out)

	rc, _, errOut = runAWF(t, "", "isolate", "matrix", "--require-enclave", "host/docker", "--require-enclave", "gvisor/sbx", "--require", "host/direct")
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, "required enclave host/docker: BLOCKED: enclave runtime docker: missing control: the Engine cannot join an existing network namespace")
	assert.Contains(t, errOut, "required enclave gvisor/sbx: BLOCKED: enclave runtime sbx: mandatory sbx enclave probes")
	assert.NotContains(t, errOut, "host/direct")

	rc, out, errOut = runAWF(t, "", "isolate", "matrix", "--json")
	require.Equal(t, 0, rc, errOut)
	var m verify.Matrix
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.NotNil(t, m.Enclave)
	assert.Len(t, m.Enclave.Cells, 16)
	c, ok := m.Enclave.Cell("docker", "docker")
	require.True(t, ok)
	assert.Equal(t, "BLOCKED", c.State)
	assert.Equal(t, "Supported when Docker is available", c.Condition)
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
