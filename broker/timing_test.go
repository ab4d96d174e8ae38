package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

const ms = time.Millisecond

func TestWaitForBucketFakeClock(t *testing.T) {
	cases := []struct {
		name    string
		elapsed time.Duration
		late    []time.Duration
		want    time.Duration
		ok      bool
		end     time.Duration // clock time at return
	}{
		{"zero lands on 10ms", 0, nil, 10 * ms, true, 10 * ms},
		{"exactly on a boundary is that bucket", 10 * ms, nil, 10 * ms, true, 10 * ms},
		{"just past 10ms", 10*ms + 1, nil, 100 * ms, true, 100 * ms},
		{"fast query 40ms", 40 * ms, nil, 100 * ms, true, 100 * ms},
		{"late by exactly 5ms is accepted", 40 * ms, []time.Duration{5 * ms}, 100 * ms, true, 105 * ms},
		{"late by 5ms+1ns re-resolves", 40 * ms, []time.Duration{5*ms + 1}, time.Second, true, time.Second},
		{"two late wakes", 40 * ms, []time.Duration{6 * ms, 6 * ms}, 10 * time.Second, true, 10 * time.Second},
		{"1.5s", 1500 * ms, nil, 10 * time.Second, true, 10 * time.Second},
		{"59s", 59 * time.Second, nil, 60 * time.Second, true, 60 * time.Second},
		{"final bucket", 599 * time.Second, nil, 600 * time.Second, true, 600 * time.Second},
		{"final bucket late wake accepted", 599 * time.Second, []time.Duration{time.Second}, 600 * time.Second, true, 601 * time.Second},
		{"exactly 600s", 600 * time.Second, nil, 600 * time.Second, true, 600 * time.Second},
		{"overflow", 600*time.Second + 1, nil, 0, false, 600*time.Second + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{late: tc.late}
			start := c.Now()
			c.advance(tc.elapsed)
			got, ok := WaitForBucket(context.Background(), c, start, tc.elapsed)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.end, c.Now()-start)
			if ok {
				assert.GreaterOrEqual(t, c.Now()-start, got, "never before the bucket")
			}
		})
	}
}

func TestWaitForBucketElapsedLargerThanClock(t *testing.T) {
	// A caller-measured elapsed time wins over an earlier clock reading.
	c := &fakeClock{}
	got, ok := WaitForBucket(context.Background(), c, 0, 150*ms)
	assert.True(t, ok)
	assert.Equal(t, time.Second, got)
}

func TestWaitForBucketRealClockNeverEarly(t *testing.T) {
	c := NewMonotonicClock()
	for i := 0; i < 5; i++ {
		start := c.Now()
		b, ok := WaitForBucket(context.Background(), c, start, 0)
		end := c.Now()
		assert.True(t, ok)
		assert.GreaterOrEqual(t, end-start, b, "answered before its bucket")
	}
}

func TestResolveBucket(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{0: 10 * ms, 10 * ms: 10 * ms, 11 * ms: 100 * ms, 100 * ms: 100 * ms, 101 * ms: time.Second, 10 * time.Second: 10 * time.Second, 61 * time.Second: 600 * time.Second} {
		got, ok := ResolveBucket(in)
		assert.True(t, ok)
		assert.Equal(t, want, got, in)
	}
	_, ok := ResolveBucket(601 * time.Second)
	assert.False(t, ok)
}
