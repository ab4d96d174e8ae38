package host

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWaitKiller: Teardown's sweep waits for the kill of the run's
// sandboxes that a broker's end starts (KillSandboxesIfBrokerDies): at
// once when none was set up or it is over, and it reports a kill still
// under way when its deadline ends.
func TestWaitKiller(t *testing.T) {
	done := make(chan struct{})
	close(done)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name    string
		killer  chan struct{}
		ctx     context.Context
		wantErr bool
	}{
		{"none set up", nil, cancelled, false},
		{"over", done, cancelled, false},
		{"under way at the deadline", make(chan struct{}), cancelled, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := (&BrokerProc{killerDone: c.killer}).waitKiller(c.ctx)
			if c.wantErr {
				assert.ErrorContains(t, err, "the kill of the run's sandboxes")
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
