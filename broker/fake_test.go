package broker

import (
	"context"
	"sync"
	"time"

	"github.com/awf-project/awf/isolate"
)

// fakeRuntime runs no sandbox: it answers with a fixed outcome per script
// and records every job, so that the pipeline can be tested without root.
type fakeRuntime struct {
	mu      sync.Mutex
	jobs    []isolate.Spec
	outcome func(isolate.Spec) isolate.Outcome
	clock   *fakeClock // when set, each run advances it by cost
	cost    time.Duration
	// prepare, when set, prepares the warm pool's sandboxes; unset, a
	// Prepare panics (a broker without a pool never prepares).
	prepare func(isolate.Template) (isolate.Sandbox, error)
}

func (f *fakeRuntime) Name() string                { return "fake" }
func (f *fakeRuntime) Probe(context.Context) error { return nil }
func (f *fakeRuntime) Sweep(context.Context) error { return nil }
func (f *fakeRuntime) Usable() error               { return nil }
func (f *fakeRuntime) Close() error                { return nil }
func (f *fakeRuntime) Prepare(_ context.Context, t isolate.Template) (isolate.Sandbox, error) {
	if f.prepare == nil {
		panic("not used")
	}
	return f.prepare(t)
}

func (f *fakeRuntime) Run(_ context.Context, s isolate.Spec) isolate.Outcome {
	f.mu.Lock()
	f.jobs = append(f.jobs, s)
	f.mu.Unlock()
	if f.clock != nil {
		f.clock.advance(f.cost)
	}
	if f.outcome != nil {
		return f.outcome(s)
	}
	return isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}
}

func (f *fakeRuntime) runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jobs)
}

// fakeClock is a manual monotonic clock. Sleep advances it by the slept
// time plus a configurable lateness per call.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Duration
	late  []time.Duration // lateness of successive sleeps
	slept []time.Duration
}

func (c *fakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now += d
	if len(c.late) > 0 {
		c.now += c.late[0]
		c.late = c.late[1:]
	}
}
