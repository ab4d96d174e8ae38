package sbx

import (
	"context"
	"errors"
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
	for _, c := range Controls {
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
	assert.GreaterOrEqual(t, len(m), len(Controls))
}
