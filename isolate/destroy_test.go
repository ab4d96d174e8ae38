package isolate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/awf-project/awf/isolate"
)

// destroyer records the context its Destroy got.
type destroyer struct {
	err      error
	deadline time.Time
	ctxErr   error
}

func (d *destroyer) Destroy(ctx context.Context) error {
	d.deadline, _ = ctx.Deadline()
	d.ctxErr = ctx.Err()
	return d.err
}

func TestDestroyAfter(t *testing.T) {
	ran := isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: 3, Timings: isolate.Timings{Run: time.Second}}
	for _, tc := range []struct {
		name string
		err  error
		want isolate.Outcome
	}{
		{name: "destroyed", want: ran},
		{name: "destroy fails", err: errors.New("busy"), want: isolate.Outcome{Kind: isolate.KindCleanupFailed, ExitCode: 3,
			Detail: "destroy enclave after nonzero-exit: busy", Timings: ran.Timings}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The job's context is already done: Destroy gets its own.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			d := &destroyer{err: tc.err}
			before := time.Now()
			got, ok := isolate.DestroyAfter(ctx, d, ran, time.Minute, "destroy enclave")
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.err == nil, ok)
			assert.NoError(t, d.ctxErr, "Destroy runs although the job's context is done")
			assert.False(t, d.deadline.Before(before.Add(time.Minute)), "Destroy has its own deadline of d")
		})
	}
}
