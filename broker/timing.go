package broker

import (
	"context"
	"runtime"
	"time"

	"github.com/awf-project/awf/proto"
)

// Clock is a monotonic clock. Now is the time since an arbitrary fixed
// origin; Sleep waits for d or until ctx is done.
type Clock interface {
	Now() time.Duration
	Sleep(ctx context.Context, d time.Duration)
}

// MonotonicClock is the real clock: Go's monotonic reading since the clock's creation.
type MonotonicClock struct{ origin time.Time }

// NewMonotonicClock returns a real monotonic clock.
func NewMonotonicClock() *MonotonicClock { return &MonotonicClock{origin: time.Now()} }

// Now returns the monotonic time since the clock was created.
func (c *MonotonicClock) Now() time.Duration { return time.Since(c.origin) }

// spinWindow is how early the timer fires before a boundary; the rest is
// waited for by yielding, so that ordinary timer and scheduler latency does
// not push the wake past the tolerance.
const spinWindow = 2 * time.Millisecond

// Sleep waits for d or until ctx is done.
func (c *MonotonicClock) Sleep(ctx context.Context, d time.Duration) {
	target := c.Now() + d
	if d > spinWindow {
		t := time.NewTimer(d - spinWindow)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
	for c.Now() < target && ctx.Err() == nil {
		runtime.Gosched()
	}
}

// Buckets are the six response-time boundaries.
var Buckets = proto.TimingBuckets()

// Tolerance is the public scheduler tolerance of a bucket wake-up (inclusive).
const Tolerance = proto.TimingToleranceMS * time.Millisecond

// ResolveBucket returns the first bucket at or after elapsed, or false on overflow.
func ResolveBucket(elapsed time.Duration) (time.Duration, bool) {
	for _, b := range Buckets {
		if elapsed <= b {
			return b, true
		}
	}
	return 0, false
}

// WaitForBucket waits until the first bucket boundary, measured from start,
// that is at or after both elapsed and the current time, and returns it. A
// wake more than Tolerance after the boundary re-resolves to the next one (the
// final bucket accepts a late wake). It returns false when the time is past
// the final bucket, or when ctx ends first (the caller then answers with the
// canonical error).
func WaitForBucket(ctx context.Context, c Clock, start, elapsed time.Duration) (time.Duration, bool) {
	final := Buckets[len(Buckets)-1]
	observed := max(elapsed, c.Now()-start)
	for {
		b, ok := ResolveBucket(observed)
		if !ok {
			return 0, false
		}
		now := c.Now()
		remaining := start + b - now
		switch {
		case remaining == 0:
			return b, true
		case remaining < 0:
			observed = now - start
			continue
		}
		c.Sleep(ctx, remaining)
		if ctx.Err() != nil {
			return 0, false
		}
		wake := c.Now()
		if wake < start+b {
			// An early wake (it should not happen): wait for the rest.
			observed = max(observed, wake-start)
			continue
		}
		if wake <= start+b+Tolerance || b == final {
			return b, true
		}
		observed = wake - start
	}
}
