package broker

import (
	"context"
	"runtime"
	"time"

	"github.com/awf-project/awf/proto"
	"golang.org/x/sys/unix"
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

// Sleep waits for d, or until ctx is done, in an absolute CLOCK_MONOTONIC
// sleep on the calling thread (see Prioritized).
func (c *MonotonicClock) Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	var now unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) != nil {
		time.Sleep(d)
		return
	}
	deadline := unix.NsecToTimespec(now.Nano() + int64(d))
	// ctx is checked between wakes only: the longest sleep is one bucket.
	for ctx.Err() == nil {
		if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &deadline, nil); err != unix.EINTR {
			return
		}
	}
}

// Prioritized runs f on a dedicated OS thread raised to SCHED_FIFO (or, where
// real-time scheduling is refused, to nice -20 for that thread only), and
// waits for it. The timing-bucket wait runs there, so that a loaded host does
// not make its wake-ups late: a wake more than the tolerance late costs a
// whole bucket. The thread is discarded afterwards.
func Prioritized(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// No UnlockOSThread: the raised thread exits with this goroutine.
		if unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0) != nil {
			_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -20)
		}
		f()
	}()
	<-done
}

// Tolerance is the public scheduler tolerance of a bucket wake-up (inclusive).
const Tolerance = proto.TimingToleranceMS * time.Millisecond

// ResolveBucket returns the first bucket at or after elapsed, or false on overflow.
func ResolveBucket(elapsed time.Duration) (time.Duration, bool) {
	for _, b := range proto.TimingBuckets() {
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
	buckets := proto.TimingBuckets()
	final := buckets[len(buckets)-1]
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
