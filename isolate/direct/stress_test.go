package direct_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/isolate"
)

// Sizes of TestStressPrepareDestroy: enough cycles that a start racing a
// discarded OS thread is near certain on the old code, bounded in time.
const (
	stressCycles      = 200
	stressConcurrency = 6
	stressExecEvery   = 8 // every n-th cycle also runs a job, proving init survived
	stressDeadline    = 4 * time.Minute
)

// TestStressPrepareDestroy runs many Prepare/Destroy cycles side by side
// while other goroutines keep ending locked OS threads, as libcontainer's
// mount-source goroutine and the mount helpers do on every start. A
// sandbox's init carries a parent-death signal, and the kernel delivers it
// when the thread that forked init ends, not the process: an init forked
// from a thread the Go runtime later discards is killed, either before it
// reads its bootstrap data ("write init-p: broken pipe") or later, while it
// waits for its job.
func TestStressPrepareDestroy(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), stressDeadline)
	defer cancel()
	tpl := e.template(t, "")

	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Ends locked: the Go runtime terminates this thread.
				runtime.LockOSThread()
			}()
			<-done
		}
	}()
	defer func() { close(stop); churn.Wait() }()

	next := make(chan int)
	errs := make(chan error, stressCycles)
	var wg sync.WaitGroup
	for range stressConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs <- stressCycle(ctx, e, tpl, i)
			}
		}()
	}
	for i := range stressCycles {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	require.Empty(t, failed, "%d of %d cycles failed", len(failed), stressCycles)
	e.assertIdle(t)
}

// stressCycle prepares one sandbox, runs a job in it every stressExecEvery
// cycles, and destroys it.
func stressCycle(ctx context.Context, e *testEnv, tpl isolate.Template, i int) error {
	sb, err := e.rt.Prepare(ctx, tpl)
	if err != nil {
		return fmt.Errorf("cycle %d: %w", i, err)
	}
	var errs []error
	if i%stressExecEvery == 0 {
		o := sb.Exec(ctx, isolate.Job{InvocationID: fmt.Sprint(i), Script: []byte(okScript)})
		if o.Kind != isolate.KindOK {
			errs = append(errs, fmt.Errorf("cycle %d: exec: %s: %s", i, o.Kind, o.Detail))
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := sb.Destroy(dctx); err != nil {
		errs = append(errs, fmt.Errorf("cycle %d: destroy: %w", i, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}
