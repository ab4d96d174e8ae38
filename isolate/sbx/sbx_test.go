package sbx

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

func TestBlockedEverywhere(t *testing.T) {
	r, err := New(isolate.HostConfig{RunID: "r1", StateDir: t.TempDir()})
	require.NoError(t, err)
	ctx := context.Background()

	perr := r.Probe(ctx)
	require.Error(t, perr)
	assert.True(t, errors.Is(perr, ErrBlocked))
	// Every control is named in the probe report.
	for _, c := range Controls() {
		assert.Contains(t, perr.Error(), c.Name)
	}
	assert.ErrorIs(t, r.Usable(), ErrBlocked)

	_, err = r.Prepare(ctx, isolate.Template{RunID: "r1", Limits: isolate.DefaultLimits()})
	assert.ErrorIs(t, err, ErrBlocked)

	o := r.Run(ctx, isolate.Spec{Template: isolate.Template{RunID: "r1", Limits: isolate.DefaultLimits()}})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind)
	assert.Contains(t, o.Detail, "BLOCKED")
	assert.Nil(t, o.Output)
	assert.NoError(t, r.Sweep(ctx))
	assert.NoError(t, r.Close())
	assert.Equal(t, "sbx", r.Name())
}

func TestMissingListsEveryControl(t *testing.T) {
	m := Missing(context.Background())
	// With no sbx CLI here every control is missing, plus the CLI itself.
	assert.GreaterOrEqual(t, len(m), len(Controls()))
}

// TestCheckIsStructured checks the seed's structured form: one object per
// control of the one list, every one required, with evidence, and the
// probe's error carries the same list as JSON.
func TestCheckIsStructured(t *testing.T) {
	ctx := context.Background()
	st := Check(ctx)
	require.Len(t, st, len(Controls()))
	for i, s := range st {
		assert.Equal(t, Controls()[i].Name, s.Control)
		assert.True(t, s.Required)
		assert.NotEmpty(t, s.Evidence)
		if Controls()[i].Flag == "" {
			assert.False(t, s.Supported, "%s has no mechanism", s.Control)
		}
	}
	r, err := New(isolate.HostConfig{})
	require.NoError(t, err)
	msg := r.Probe(ctx).Error()
	_, js, ok := strings.Cut(msg, "; controls: ")
	require.True(t, ok, msg)
	var back []ControlStatus
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&back))
	assert.Equal(t, st, back)
	var m []map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &m))
	for _, o := range m {
		assert.ElementsMatch(t, []string{"control", "required", "supported", "evidence"}, keys(o))
	}
	assert.NotContains(t, AuditedMissing(), "memory limit", "the audited CLI has --memory")
	assert.Contains(t, AuditedMissing(), "pids limit")
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
