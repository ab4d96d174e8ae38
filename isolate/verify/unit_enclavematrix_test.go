package verify

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/docker"
	"github.com/awf-project/awf/isolate/enclave"
)

// stubEnclaveRuntime is a stub runtime that renders enclaves, as direct and
// gvisor do.
type stubEnclaveRuntime struct{ stubRuntime }

func (stubEnclaveRuntime) RunEnclave(context.Context, isolate.Template, enclave.Layout, isolate.Job) (isolate.Outcome, []byte) {
	return isolate.Outcome{}, nil
}

// enclaveTestMatrix is a query matrix whose direct and gvisor probes pass
// and docker's engine is absent; agents host and gvisor are available.
func enclaveTestMatrix(t *testing.T, render map[string]bool, opened map[string]int) (*Matrix, func(string, isolate.HostConfig) (isolate.Runtime, error)) {
	t.Helper()
	open := func(name string, h isolate.HostConfig) (isolate.Runtime, error) {
		if opened != nil {
			opened[name]++
		}
		if name == "docker" {
			return nil, errors.New("docker: no engine")
		}
		if render[name] {
			return stubEnclaveRuntime{stubRuntime{name: name}}, nil
		}
		return stubRuntime{name: name}, nil
	}
	m := BuildMatrix(context.Background(), MatrixOptions{
		Open: open,
		Agent: func(_ context.Context, name string) Availability {
			switch name {
			case "host", "gvisor":
				return Availability{CellSupported, name + " fine"}
			}
			return Availability{CellUnavailable, name + " absent"}
		},
	})
	return m, open
}

// TestEnclaveMatrix checks the primary × enclave matrix in the seed's
// terms: the nine seed cells in its order with its conditions, awf's seven
// after them and marked, each cell's state from one proof per enclave
// runtime (docker and sbx BLOCKED by their missing controls whatever is
// installed, a runtime that renders no enclave BLOCKED), --require-enclave's
// unmet lines, the text and the JSON.
func TestEnclaveMatrix(t *testing.T) {
	opened := map[string]int{}
	m, open := enclaveTestMatrix(t, map[string]bool{"direct": true, "gvisor": true}, nil)
	em := m.BuildEnclaveMatrix(context.Background(), EnclaveMatrixOptions{Open: func(n string, h isolate.HostConfig) (isolate.Runtime, error) {
		opened[n]++
		return open(n, h)
	}})
	assert.Equal(t, map[string]int{"direct": 1, "gvisor": 1}, opened, "each enclave runtime is opened once, docker and sbx never")
	assert.Equal(t, "preflight", em.Proof)
	require.Len(t, em.Cells, 16)
	var order []string
	for _, c := range em.Cells[:9] {
		assert.Equal(t, OriginSeed, c.Origin)
		order = append(order, c.Primary+"/"+c.Enclave)
		assert.False(t, strings.HasPrefix(c.Condition, "awf:"))
	}
	assert.Equal(t, []string{"docker/docker", "docker/gvisor", "docker/sbx", "gvisor/docker", "gvisor/gvisor", "gvisor/sbx", "sbx/docker", "sbx/gvisor", "sbx/sbx"}, order)
	for _, c := range em.Cells[9:] {
		assert.Equal(t, OriginAWF, c.Origin)
		assert.True(t, c.Primary == "host" || c.Enclave == "direct", "%s/%s", c.Primary, c.Enclave)
		assert.True(t, strings.HasPrefix(c.Condition, "awf:"), c.Condition)
	}

	cases := []struct {
		primary, enc, state, reason string
	}{
		{"gvisor", "gvisor", "SUPPORTED", "enclave: preflight: probe passed"},
		{"host", "direct", "SUPPORTED", "enclave: preflight: probe passed"},
		{"host", "gvisor", "SUPPORTED", ""},
		{"docker", "gvisor", "UNAVAILABLE", "agent runtime docker: docker absent"},
		{"host", "docker", "BLOCKED", "enclave runtime docker: missing control: " + docker.EnclaveMissingControl},
		{"gvisor", "docker", "BLOCKED", "enclave runtime docker: missing control: the Engine cannot join an existing network namespace"},
		{"docker", "docker", "BLOCKED", "enclave runtime docker: "},
		{"host", "sbx", "BLOCKED", "enclave runtime sbx: mandatory sbx enclave probes: missing controls: an enforced API-proxy-only network"},
		{"sbx", "sbx", "BLOCKED", "enclave runtime sbx: "},
		{"sbx", "direct", "UNAVAILABLE", "agent runtime sbx: "},
	}
	for _, tc := range cases {
		c, ok := em.Cell(tc.primary, tc.enc)
		require.True(t, ok, "%s/%s", tc.primary, tc.enc)
		assert.Equal(t, tc.state, c.State, "%s/%s: %s", tc.primary, tc.enc, c.Reason)
		assert.Contains(t, c.Reason, tc.reason, "%s/%s", tc.primary, tc.enc)
	}
	for _, p := range AgentRuntimes() {
		c, _ := em.Cell(p, "sbx")
		assert.Equal(t, "BLOCKED", c.State, "every sbx enclave cell is BLOCKED")
		assert.NotContains(t, c.Reason, "no network,", "the enclave replaces no network by its one peer")
	}
	c, _ := em.Cell("docker", "docker")
	assert.Equal(t, "Supported when Docker is available", c.Condition)
	c, _ = em.Cell("sbx", "gvisor")
	assert.Equal(t, "Supported when primary sbx ingress and `runsc` are proven", c.Condition)
	c, _ = em.Cell("gvisor", "sbx")
	assert.Equal(t, "Blocked by mandatory sbx enclave probes", c.Condition)

	assert.Empty(t, em.Unmet([]string{"gvisor/gvisor", "host/direct"}))
	unmet := em.Unmet([]string{"host/docker", "docker/sbx", "vm/direct"})
	require.Len(t, unmet, 3)
	assert.True(t, strings.HasPrefix(unmet[0], "enclave host/docker: BLOCKED: enclave runtime docker: missing control: "), unmet[0])
	assert.True(t, strings.HasPrefix(unmet[1], "enclave docker/sbx: BLOCKED: "), unmet[1])
	assert.Contains(t, unmet[2], "want PRIMARY/ENCLAVE")

	out := seedTableText(t, em, "awf's own enclave cells")
	assert.True(t, strings.HasPrefix(out, "Primary agent  Docker enclave  gVisor enclave  sbx enclave\n"), out)
	assert.Contains(t, out, "\ngVisor         BLOCKED         SUPPORTED       BLOCKED\n", out)

	m.Enclave = em
	back := matrixJSONRoundTrip(t, m)
	require.NotNil(t, back.Enclave)
	assert.Equal(t, *em, *back.Enclave)
}

// TestEnclaveMatrixProofs checks each enclave runtime's one proof: a
// runtime that renders no enclave is BLOCKED, a failed probe stays
// UNAVAILABLE, and with the network check only PASS is SUPPORTED, one
// RunEnclave call covering every runtime whose preflight passed.
func TestEnclaveMatrixProofs(t *testing.T) {
	t.Run("no enclave rendering", func(t *testing.T) {
		m, open := enclaveTestMatrix(t, map[string]bool{"direct": true}, nil)
		em := m.BuildEnclaveMatrix(context.Background(), EnclaveMatrixOptions{Open: open})
		assert.Equal(t, CellSupported, em.Runtimes["direct"].State)
		assert.Equal(t, CellBlocked, em.Runtimes["gvisor"].State)
		assert.Contains(t, em.Runtimes["gvisor"].Reason, "does not render the enclave's read-only layout")
	})
	t.Run("probe failed", func(t *testing.T) {
		m, open := enclaveTestMatrix(t, map[string]bool{"direct": true, "gvisor": true}, nil)
		m.Queries["gvisor"] = Availability{CellUnavailable, "runsc not found"}
		em := m.BuildEnclaveMatrix(context.Background(), EnclaveMatrixOptions{Open: open})
		assert.Equal(t, Availability{CellUnavailable, "runsc not found"}, em.Runtimes["gvisor"])
		c, _ := em.Cell("host", "gvisor")
		assert.Equal(t, "UNAVAILABLE", c.State)
	})
	cases := []struct {
		name    string
		direct  RuntimeReport
		gvisor  RuntimeReport
		wantDir string
		wantGV  string
		reason  string
	}{
		{"both pass", RuntimeReport{Name: "direct", Status: Pass, Results: []Result{{ID: "enclave/proxy", Status: Pass}}},
			RuntimeReport{Name: "gvisor", Status: Pass}, CellSupported, CellSupported, "enclave network probes passed"},
		{"gvisor blocked", RuntimeReport{Name: "direct", Status: Pass},
			RuntimeReport{Name: "gvisor", Status: Blocked, Reason: "this runsc cannot drive a network namespace"}, CellSupported, CellBlocked, "this runsc cannot drive a network namespace"},
		{"gvisor leaks", RuntimeReport{Name: "direct", Status: Pass},
			RuntimeReport{Name: "gvisor", Status: Fail, Results: []Result{{ID: "enclave/proxy", Status: Pass}, {ID: "enclave/host-loopback", Status: Fail, Evidence: "connected"}}},
			CellSupported, CellBlocked, "FAIL enclave/host-loopback: connected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, open := enclaveTestMatrix(t, map[string]bool{"direct": true, "gvisor": true}, nil)
			calls := 0
			em := m.BuildEnclaveMatrix(context.Background(), EnclaveMatrixOptions{Open: open, Network: &EnclaveOptions{ProbeBinary: "/probe"},
				RunNetwork: func(_ context.Context, o EnclaveOptions) (*EnclaveReport, error) {
					calls++
					assert.Equal(t, []string{"direct", "gvisor"}, o.Runtimes, "only the runtimes whose preflight passed")
					assert.Equal(t, "/probe", o.ProbeBinary)
					return &EnclaveReport{Runtimes: []RuntimeReport{tc.direct, tc.gvisor}}, nil
				}})
			assert.Equal(t, 1, calls, "one network proof for all runtimes")
			assert.Equal(t, "network", em.Proof)
			assert.Equal(t, tc.wantDir, em.Runtimes["direct"].State)
			assert.Equal(t, tc.wantGV, em.Runtimes["gvisor"].State)
			assert.Contains(t, em.Runtimes["gvisor"].Reason, tc.reason)
			assert.Equal(t, CellBlocked, em.Runtimes["docker"].State, "docker is never proven by the network check")
		})
	}
	t.Run("network check cannot run", func(t *testing.T) {
		m, open := enclaveTestMatrix(t, map[string]bool{"direct": true, "gvisor": true}, nil)
		em := m.BuildEnclaveMatrix(context.Background(), EnclaveMatrixOptions{Open: open, Network: &EnclaveOptions{},
			RunNetwork: func(context.Context, EnclaveOptions) (*EnclaveReport, error) {
				return nil, errors.New("verify: no enclave probe binary")
			}})
		for _, n := range []string{"direct", "gvisor"} {
			assert.Equal(t, CellUnavailable, em.Runtimes[n].State)
			assert.Contains(t, em.Runtimes[n].Reason, "no enclave probe binary")
		}
	})
}
