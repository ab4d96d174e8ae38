package pool

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/policy"
)

// fakeRuntime prepares fakeSandboxes and records each one.
type fakeRuntime struct {
	mu         sync.Mutex
	made       []*fakeSandbox
	usable     error
	prepareErr map[string]error // by template repo
	destroyErr error
}

func (f *fakeRuntime) Name() string                { return "fake" }
func (f *fakeRuntime) Probe(context.Context) error { return nil }
func (f *fakeRuntime) Sweep(context.Context) error { return nil }
func (f *fakeRuntime) Usable() error               { return f.usable }
func (f *fakeRuntime) Close() error                { return nil }
func (f *fakeRuntime) Run(ctx context.Context, s isolate.Spec) isolate.Outcome {
	return isolate.RunWithSandbox(ctx, f, s)
}

func (f *fakeRuntime) Prepare(_ context.Context, t isolate.Template) (isolate.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.prepareErr[t.Repo]; err != nil {
		return nil, err
	}
	sb := &fakeSandbox{t: t, n: len(f.made), destroyErr: f.destroyErr}
	f.made = append(f.made, sb)
	return sb, nil
}

func (f *fakeRuntime) all() []*fakeSandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeSandbox(nil), f.made...)
}

type fakeSandbox struct {
	mu         sync.Mutex
	t          isolate.Template
	n          int
	jobs       []string
	destroyed  bool
	destroyErr error
}

func (s *fakeSandbox) Exec(_ context.Context, j isolate.Job) isolate.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = append(s.jobs, j.InvocationID)
	if len(s.jobs) > 1 || s.destroyed {
		return isolate.Err(isolate.KindLaunchFailed, "used")
	}
	return isolate.Outcome{Kind: isolate.KindOK, Output: []byte("true")}
}

func (s *fakeSandbox) Destroy(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.destroyed = true
	return s.destroyErr
}

func (s *fakeSandbox) state() (jobs int, destroyed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs), s.destroyed
}

func template(repo string) isolate.Template {
	return isolate.Template{RunID: "run1", RootFS: "/rootfs", Repo: repo, Limits: isolate.DefaultLimits(), Policy: testPolicy}
}

var testPolicy = &policy.Policy{Name: "test.policy"}

func TestNewRefuses(t *testing.T) {
	rt := &fakeRuntime{}
	enclave := template("/seeds/a")
	enclave.Network = &isolate.Network{NetNS: "/run/netns/x", Peer: netip.MustParseAddrPort("169.254.0.1:80")}
	for _, c := range []struct {
		name      string
		rt        isolate.Runtime
		size      int
		templates []isolate.Template
	}{
		{"no runtime", nil, 1, nil},
		{"size zero", rt, 0, []isolate.Template{template("/seeds/a")}},
		{"size negative", rt, -1, nil},
		{"an enclave", rt, 1, []isolate.Template{template("/seeds/a"), enclave}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.rt, c.size, c.templates)
			assert.Error(t, err)
		})
	}
}

// TestNeverHandsOutAUsedSandbox takes, runs and refills many times, with
// and without a refill between takes, and checks that every sandbox Take
// returns is new: never executed, never destroyed, never returned before.
func TestNeverHandsOutAUsedSandbox(t *testing.T) {
	for _, c := range []struct {
		name   string
		size   int
		refill bool
	}{
		{"size 1, refilled", 1, true},
		{"size 3, refilled", 3, true},
		{"size 2, never refilled", 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			rt := &fakeRuntime{}
			tp := template("/seeds/a")
			p, err := New(rt, c.size, []isolate.Template{tp, tp})
			require.NoError(t, err)
			n, err := p.Fill(ctx)
			require.NoError(t, err)
			require.Equal(t, c.size, n, "a duplicated template is kept once")
			seen := map[*fakeSandbox]bool{}
			for i := 0; i < 10; i++ {
				sb, err := p.Take(ctx, tp)
				require.NoError(t, err)
				fs := sb.(*fakeSandbox)
				jobs, destroyed := fs.state()
				require.False(t, seen[fs], "take %d returned a sandbox twice", i)
				require.Zero(t, jobs, "take %d returned an executed sandbox", i)
				require.False(t, destroyed, "take %d returned a destroyed sandbox", i)
				seen[fs] = true
				o := fs.Exec(ctx, isolate.Job{InvocationID: "job"})
				require.Equal(t, isolate.KindOK, o.Kind)
				require.NoError(t, fs.Destroy(ctx))
				if c.refill {
					_, err := p.Fill(ctx)
					require.NoError(t, err)
				}
			}
			// Run goes through Take too, and destroys what it used.
			o := p.Run(ctx, isolate.Spec{Template: tp, Job: isolate.Job{InvocationID: "run"}})
			require.Equal(t, isolate.KindOK, o.Kind)
			for _, fs := range rt.all() {
				jobs, destroyed := fs.state()
				assert.LessOrEqual(t, jobs, 1, "sandbox %d ran %d jobs", fs.n, jobs)
				assert.Equal(t, jobs == 1, destroyed, "sandbox %d: used sandboxes, and only they, are destroyed", fs.n)
			}
			st := p.Stats()
			assert.Equal(t, 11, st.Warm+st.Cold)
			if c.refill {
				assert.Equal(t, 11, st.Warm)
				assert.Equal(t, c.size-1, st.Idle, "Run took one and nothing refilled it")
			} else {
				assert.Equal(t, c.size, st.Warm)
				assert.Zero(t, st.Idle)
			}
			require.NoError(t, p.Close(ctx))
		})
	}
}

// TestKeyedByTheWholeTemplate fills the pool for one template and takes
// with templates that differ in one field each: every one is cold and gets
// a sandbox prepared for itself, and the prepared one is left for its own
// template.
func TestKeyedByTheWholeTemplate(t *testing.T) {
	base := template("/seeds/a")
	vary := func(f func(*isolate.Template)) isolate.Template {
		v := base
		f(&v)
		return v
	}
	for _, c := range []struct {
		name string
		t    isolate.Template
	}{
		{"another seed", vary(func(t *isolate.Template) { t.Repo = "/seeds/b" })},
		{"no seed", vary(func(t *isolate.Template) { t.Repo = "" })},
		{"another rootfs", vary(func(t *isolate.Template) { t.RootFS = "/rootfs2" })},
		{"another run", vary(func(t *isolate.Template) { t.RunID = "run2" })},
		{"another wall limit", vary(func(t *isolate.Template) { t.Limits.Wall = time.Second })},
		{"another memory limit", vary(func(t *isolate.Template) { t.Limits.MemoryBytes = 64 << 20 })},
		{"another output cap", vary(func(t *isolate.Template) { t.Limits.OutputBytes = 2 })},
		{"an equal policy elsewhere", vary(func(t *isolate.Template) { p := *testPolicy; t.Policy = &p })},
		{"no policy", vary(func(t *isolate.Template) { t.Policy = nil })},
		{"weakened", vary(func(t *isolate.Template) { t.Weaken.NoSeccomp = true })},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			rt := &fakeRuntime{}
			p, err := New(rt, 1, []isolate.Template{base})
			require.NoError(t, err)
			_, err = p.Fill(ctx)
			require.NoError(t, err)
			sb, err := p.Take(ctx, c.t)
			require.NoError(t, err)
			assert.Equal(t, c.t, sb.(*fakeSandbox).t)
			assert.Equal(t, Stats{Idle: 1, Cold: 1, Prepared: 1}, p.Stats())
			sb, err = p.Take(ctx, base)
			require.NoError(t, err)
			assert.Equal(t, base, sb.(*fakeSandbox).t)
			assert.Equal(t, 1, p.Stats().Warm)
		})
	}
}

func TestCloseDestroysIdle(t *testing.T) {
	for _, c := range []struct {
		name       string
		destroyErr error
	}{
		{"destroys", nil},
		{"reports a failed destroy", errors.New("stuck")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			rt := &fakeRuntime{destroyErr: c.destroyErr}
			a, b := template("/seeds/a"), template("/seeds/b")
			p, err := New(rt, 2, []isolate.Template{a, b})
			require.NoError(t, err)
			n, err := p.Fill(ctx)
			require.NoError(t, err)
			require.Equal(t, 4, n)
			taken, err := p.Take(ctx, a)
			require.NoError(t, err)
			err = p.Close(ctx)
			if c.destroyErr != nil {
				assert.ErrorIs(t, err, c.destroyErr)
			} else {
				assert.NoError(t, err)
			}
			for _, fs := range rt.all() {
				_, destroyed := fs.state()
				assert.Equal(t, fs != taken, destroyed, "sandbox %d", fs.n)
			}
			st := p.Stats()
			assert.Equal(t, 3, st.Destroyed)
			assert.Zero(t, st.Idle)
			assert.Zero(t, p.Missing())
			n, err = p.Fill(ctx)
			assert.NoError(t, err)
			assert.Zero(t, n, "a closed pool prepares nothing")
			_, err = p.Take(ctx, b)
			require.NoError(t, err)
			assert.Equal(t, 1, p.Stats().Cold, "a take after close is cold")
			assert.NoError(t, p.Close(ctx), "a second close has nothing left")
		})
	}
}

func TestFillFailures(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	rt := &fakeRuntime{prepareErr: map[string]error{"/seeds/a": boom}}
	a, b := template("/seeds/a"), template("/seeds/b")
	p, err := New(rt, 2, []isolate.Template{a, b})
	require.NoError(t, err)
	assert.Equal(t, 4, p.Missing())
	n, err := p.Fill(ctx)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, 2, n, "the other template is filled")
	assert.Equal(t, 2, p.Missing())
	assert.Equal(t, 1, p.Stats().Failed, "a failing template is tried once per fill")

	rt.usable = errors.New("broken")
	n, err = p.Fill(ctx)
	assert.Error(t, err)
	assert.Zero(t, n)
	o := p.Run(ctx, isolate.Spec{Template: b, Job: isolate.Job{InvocationID: "x"}})
	assert.Equal(t, isolate.KindLaunchFailed, o.Kind, "an unusable runtime fails closed before any take")
	assert.Equal(t, 2, p.Stats().Idle)
}

func TestRunDestroyFailureIsACleanupFailure(t *testing.T) {
	ctx := context.Background()
	rt := &fakeRuntime{destroyErr: errors.New("stuck")}
	tp := template("/seeds/a")
	p, err := New(rt, 1, []isolate.Template{tp})
	require.NoError(t, err)
	_, err = p.Fill(ctx)
	require.NoError(t, err)
	o := p.Run(ctx, isolate.Spec{Template: tp, Job: isolate.Job{InvocationID: "x"}})
	assert.Equal(t, isolate.KindCleanupFailed, o.Kind)
}

// item is a Core's prepared thing in these tests: which template it was
// prepared for, and whether it was destroyed.
type item struct {
	t         isolate.Template
	destroyed bool
}

// items prepares and destroys items, recording each; gate, when set, is
// received from before each prepare returns.
type items struct {
	mu         sync.Mutex
	made       []*item
	prepareErr error
	gate       chan struct{}
}

func (s *items) core(t *testing.T, size int, ts ...isolate.Template) *Core[*item] {
	t.Helper()
	c, err := NewCore(size, ts, Items[*item]{
		Runtime: &fakeRuntime{},
		Prepare: func(_ context.Context, t isolate.Template) (*item, error) {
			s.mu.Lock()
			err, gate := s.prepareErr, s.gate
			it := &item{t: t}
			if err == nil {
				s.made = append(s.made, it)
			}
			s.mu.Unlock()
			if gate != nil {
				<-gate
			}
			return it, err
		},
		Destroy: func(_ context.Context, it *item) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			it.destroyed = true
			return nil
		},
		DestroyTimeout: time.Second,
		Pool:           "test pool",
		Item:           "item",
	})
	require.NoError(t, err)
	return c
}

func (s *items) destroyed() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []bool
	for _, it := range s.made {
		out = append(out, it.destroyed)
	}
	return out
}

func TestCoreRefusesSizeZero(t *testing.T) {
	_, err := NewCore(0, nil, Items[*item]{Pool: "test pool"})
	assert.ErrorContains(t, err, "test pool: size 0")
}

// TestCoreFillFor: FillFor and MissingFor concern the given templates
// only; a template the core does not keep prepares nothing; Fill and
// Missing are the same over Templates.
func TestCoreFillFor(t *testing.T) {
	ctx := context.Background()
	a, b, other := template("/seeds/a"), template("/seeds/b"), template("/seeds/other")
	s := &items{}
	c := s.core(t, 2, a, b, a)
	assert.Equal(t, []isolate.Template{a, b}, c.Templates(), "in order, each once")
	assert.Equal(t, 4, c.Missing())
	assert.Equal(t, 2, c.MissingFor(b, b))
	assert.Zero(t, c.MissingFor(other))
	assert.Zero(t, c.MissingFor())

	n, err := c.FillFor(ctx, b, other)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Zero(t, c.MissingFor(b))
	assert.Equal(t, 2, c.MissingFor(a))
	n, err = c.Fill(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "Fill prepares what is left")
	assert.Zero(t, c.Missing())
	assert.Equal(t, Stats{Idle: 4, Prepared: 4}, c.Stats())

	s.prepareErr = errors.New("boom")
	_, ok := c.TakeIdle(a, nil)
	require.True(t, ok)
	n, err = c.FillFor(ctx, a)
	assert.ErrorContains(t, err, "test pool: prepare for /seeds/a: boom")
	assert.Zero(t, n)
	assert.Equal(t, 1, c.MissingFor(a), "a failed prepare leaves its template short")
}

// TestCoreTakeRefusesWhatDoesNotFit: an item that fits refuses is
// destroyed, never returned, and the take is cold; the next item is
// there for a take it fits.
func TestCoreTakeRefusesWhatDoesNotFit(t *testing.T) {
	ctx := context.Background()
	a := template("/seeds/a")
	s := &items{}
	c := s.core(t, 2, a)
	_, err := c.Fill(ctx)
	require.NoError(t, err)
	it, ok := c.TakeIdle(a, func(*item) bool { return false })
	assert.False(t, ok)
	assert.Nil(t, it)
	assert.Equal(t, []bool{true, false}, s.destroyed())
	it, ok = c.TakeIdle(a, func(*item) bool { return true })
	require.True(t, ok)
	assert.Same(t, s.made[1], it)
	_, ok = c.TakeIdle(a, nil)
	assert.False(t, ok, "none is left")
	assert.Equal(t, Stats{Warm: 1, Cold: 2, Prepared: 2, Destroyed: 1}, c.Stats())
}

// TestCoreFillAfterClose: an item whose prepare returns after Close is
// destroyed by that fill, never kept, and the fill goes no further.
func TestCoreFillAfterClose(t *testing.T) {
	ctx := context.Background()
	a, b := template("/seeds/a"), template("/seeds/b")
	gate := make(chan struct{})
	s := &items{gate: gate}
	c := s.core(t, 1, a, b)
	filled := make(chan int, 1)
	go func() {
		n, err := c.Fill(ctx)
		assert.NoError(t, err)
		filled <- n
	}()
	require.Eventually(t, func() bool { return len(s.destroyed()) == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, c.Close(ctx))
	close(gate)
	assert.Zero(t, <-filled)
	assert.Equal(t, []bool{true}, s.destroyed(), "b was never prepared, a was destroyed")
	assert.Equal(t, Stats{}, c.Stats())
	_, ok := c.TakeIdle(a, nil)
	assert.False(t, ok)
}
