package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

func TestCombine(t *testing.T) {
	ok := Availability{CellSupported, "fine"}
	gone := Availability{CellUnavailable, "absent"}
	blk := Availability{CellBlocked, "by design"}
	cases := []struct {
		a, q Availability
		want string
	}{
		{ok, ok, CellSupported},
		{gone, ok, CellUnavailable},
		{ok, gone, CellUnavailable},
		{blk, ok, CellBlocked},
		{ok, blk, CellBlocked},
		{gone, blk, CellBlocked},
		{blk, gone, CellBlocked},
	}
	for _, tc := range cases {
		c := combine("a", "q", tc.a, tc.q)
		assert.Equal(t, tc.want, c.State, "%v × %v", tc.a, tc.q)
		assert.NotEmpty(t, c.Reason)
	}
}

// stubRuntime is a runtime whose Probe returns err.
type stubRuntime struct {
	isolate.Runtime
	name string
	err  error
}

func (s stubRuntime) Name() string                { return s.name }
func (s stubRuntime) Probe(context.Context) error { return s.err }
func (s stubRuntime) Close() error                { return nil }

func TestBuildMatrix(t *testing.T) {
	m := BuildMatrix(context.Background(), MatrixOptions{
		Open: func(name string, h isolate.HostConfig) (isolate.Runtime, error) {
			switch name {
			case "direct":
				return stubRuntime{name: name}, nil
			case "gvisor":
				return stubRuntime{name: name, err: errors.New("runsc not found")}, nil
			}
			return nil, errors.New(name + ": no engine")
		},
		Agent: func(_ context.Context, name string) Availability {
			if name == "host" {
				return Availability{CellSupported, "host"}
			}
			return Availability{CellUnavailable, name + " absent"}
		},
	})
	assert.Len(t, m.Cells, len(AgentRuntimes())*4)
	c, ok := m.Cell("host", "direct")
	require.True(t, ok)
	assert.Equal(t, CellSupported, c.State)
	c, _ = m.Cell("host", "gvisor")
	assert.Equal(t, CellUnavailable, c.State)
	assert.Contains(t, c.Reason, "runsc not found")
	for _, a := range AgentRuntimes() {
		c, _ := m.Cell(a, "sbx")
		assert.Equal(t, CellBlocked, c.State, "sbx query cells are always blocked")
		for _, ctl := range SbxMissingControls() {
			assert.Contains(t, c.Reason, ctl)
		}
		require.NotEmpty(t, c.Controls, "the seed's structured list: one object per control")
		for _, ctl := range c.Controls {
			assert.NotEmpty(t, ctl.Control)
			assert.True(t, ctl.Required, ctl.Control)
			assert.NotEmpty(t, ctl.Evidence, ctl.Control)
			if !ctl.Supported {
				assert.Contains(t, c.Reason, ctl.Control)
			}
		}
	}
	for _, q := range []string{"direct", "gvisor"} {
		c, _ := m.Cell("host", q)
		assert.Empty(t, c.Controls, "only a runtime blocked by missing controls lists them")
	}
	seed := m.InSeedTerms()
	sc, ok := seed.Cell("docker", "sbx")
	require.True(t, ok)
	assert.Equal(t, c0(m, "docker", "sbx").Controls, sc.Controls, "the seed JSON carries the same objects")
	assert.Empty(t, m.Unmet([]string{"host/direct"}))
	assert.Len(t, m.Unmet([]string{"host/gvisor", "docker/direct", "bogus"}), 3)

	var txt, js bytes.Buffer
	require.NoError(t, m.WriteText(&txt))
	assert.Contains(t, txt.String(), "host/sbx")
	require.NoError(t, m.WriteJSON(&js))
	var back Matrix
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	assert.Equal(t, MatrixVersion, back.Version)
	assert.Len(t, back.Cells, 16)
}

func TestParsePair(t *testing.T) {
	a, q, err := ParsePair("docker/direct")
	require.NoError(t, err)
	assert.Equal(t, "docker", a)
	assert.Equal(t, "direct", q)
	for _, bad := range []string{"docker", "docker/", "/direct", "vm/direct", "docker/vm", "docker/direct/x"} {
		_, _, err := ParsePair(bad)
		assert.Error(t, err, bad)
	}
}

func TestAgentAvailability(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, CellSupported, agentAvailability(ctx, "host", "").State)
	sock := fakeEngine(t, map[string]any{"runc": map[string]any{}})
	assert.Equal(t, CellSupported, agentAvailability(ctx, "docker", sock).State)
	g := agentAvailability(ctx, "gvisor", sock)
	assert.Equal(t, CellUnavailable, g.State)
	assert.Contains(t, g.Reason, "runsc is not registered")
	withRunsc := fakeEngine(t, map[string]any{"runsc": map[string]any{}})
	assert.Equal(t, CellSupported, agentAvailability(ctx, "gvisor", withRunsc).State)
	assert.NotEqual(t, CellSupported, agentAvailability(ctx, "sbx", sock).State)
}

func c0(m *Matrix, a, q string) Cell {
	c, _ := m.Cell(a, q)
	return c
}
