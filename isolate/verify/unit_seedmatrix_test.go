package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// TestSeedMatrix checks the matrix in the seed's terms: its nine cells in
// its order with its conditions, awf's own seven cells after them and
// marked, the states in capitals, --require's unmet lines, and the JSON.
func TestSeedMatrix(t *testing.T) {
	m := BuildMatrix(context.Background(), MatrixOptions{
		Open: func(name string, h isolate.HostConfig) (isolate.Runtime, error) {
			if name == "docker" {
				return nil, errors.New("docker: no engine")
			}
			return stubRuntime{name: name}, nil
		},
		Agent: func(_ context.Context, name string) Availability {
			switch name {
			case "host", "gvisor":
				return Availability{CellSupported, name + " fine"}
			}
			return Availability{CellUnavailable, name + " absent"}
		},
	})
	s := m.InSeedTerms()
	require.Len(t, s.Cells, 16)
	var order []string
	for _, c := range s.Cells[:9] {
		assert.Equal(t, OriginSeed, c.Origin)
		order = append(order, c.Primary+"/"+c.Query)
		assert.NotEmpty(t, c.Condition)
		assert.False(t, strings.HasPrefix(c.Condition, "awf:"), "a seed cell has the seed's condition")
	}
	assert.Equal(t, []string{"docker/docker", "docker/gvisor", "docker/sbx", "gvisor/docker", "gvisor/gvisor", "gvisor/sbx", "sbx/docker", "sbx/gvisor", "sbx/sbx"}, order)
	for _, c := range s.Cells[9:] {
		assert.Equal(t, OriginAWF, c.Origin)
		assert.True(t, c.Primary == "host" || c.Query == "direct", "%s/%s", c.Primary, c.Query)
	}
	state := func(p, q string) string { c, _ := s.Cell(p, q); return c.State }
	assert.Equal(t, "SUPPORTED", state("gvisor", "gvisor"))
	assert.Equal(t, "UNAVAILABLE", state("gvisor", "docker"))
	assert.Equal(t, "UNAVAILABLE", state("docker", "gvisor"))
	assert.Equal(t, "SUPPORTED", state("host", "direct"))
	for _, p := range append(SeedPrimaries(), "host") {
		assert.Equal(t, "BLOCKED", state(p, "sbx"))
	}
	c, _ := s.Cell("docker", "docker")
	assert.Equal(t, "Supported when Docker is available", c.Condition)
	c, _ = s.Cell("sbx", "gvisor")
	assert.Equal(t, "Supported when primary sbx, ingress, and runsc probes pass", c.Condition)

	assert.Empty(t, s.Unmet([]string{"gvisor/gvisor", "host/direct"}))
	unmet := s.Unmet([]string{"docker/sbx", "gvisor/docker", "vm/x"})
	require.Len(t, unmet, 3)
	assert.True(t, strings.HasPrefix(unmet[0], "docker/sbx: BLOCKED: query runtime sbx: missing controls: "), unmet[0])
	assert.True(t, strings.HasPrefix(unmet[1], "gvisor/docker: UNAVAILABLE: query runtime docker: "), unmet[1])

	out := seedTableText(t, s, "awf's own cells")
	assert.True(t, strings.HasPrefix(out, "Primary agent  Docker query  gVisor query  sbx query\n"), out)

	m.Seed = s
	back := matrixJSONRoundTrip(t, m)
	require.NotNil(t, back.Seed)
	assert.Equal(t, *s, *back.Seed)
	assert.Len(t, back.Cells, 16, "the matrix's own cells stay")
}

// seedTableText is the text of one of the seed's tables, whose seed part
// (before the heading own of awf's own cells) must name none of awf's.
func seedTableText(t *testing.T, tb interface{ WriteText(io.Writer) error }, own string) string {
	t.Helper()
	var txt bytes.Buffer
	require.NoError(t, tb.WriteText(&txt))
	out := txt.String()
	seedPart, awfPart, ok := strings.Cut(out, own)
	require.True(t, ok, out)
	assert.NotContains(t, seedPart, "host/")
	assert.NotContains(t, seedPart, "/direct")
	assert.Contains(t, awfPart, "host/direct")
	return out
}

// matrixJSONRoundTrip writes m as JSON and reads it back.
func matrixJSONRoundTrip(t *testing.T, m *Matrix) Matrix {
	t.Helper()
	var js bytes.Buffer
	require.NoError(t, m.WriteJSON(&js))
	var back Matrix
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	return back
}
