package isolate_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

func TestSingleUse(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		use      bool // Use before Destroy
		teardown error
	}{
		{name: "destroyed unused"},
		{name: "destroyed after its job", use: true},
		{name: "teardown fails", use: true, teardown: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u isolate.SingleUse
			if tc.use {
				require.True(t, u.Use(), "a fresh sandbox takes one job")
				assert.False(t, u.Use(), "and no second")
			}
			runs := 0
			teardown := func() error { runs++; return tc.teardown }
			assert.Equal(t, tc.teardown, u.Destroy(teardown))
			assert.Equal(t, tc.teardown, u.Destroy(teardown), "a later Destroy returns the first one's error")
			assert.Equal(t, 1, runs, "teardown runs once")
			assert.False(t, u.Use(), "no job once destroyed")
		})
	}
}

// TestSingleUseConcurrent claims one sandbox from many goroutines: exactly
// one wins, and teardown runs once however many destroy it.
func TestSingleUseConcurrent(t *testing.T) {
	var u isolate.SingleUse
	var mu sync.Mutex
	won, runs := 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if u.Use() {
				mu.Lock()
				won++
				mu.Unlock()
			}
			_ = u.Destroy(func() error { mu.Lock(); runs++; mu.Unlock(); return nil })
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, won, 1)
	assert.Equal(t, 1, runs)
}
