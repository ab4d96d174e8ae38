package isolate

import "sync"

// SingleUse keeps the two rules of the Sandbox contract that every backend
// keeps the same way: Exec runs at most one job, and none once Destroy has
// begun; Destroy tears the sandbox down once, and every later call returns
// the first one's error. The zero value is a fresh sandbox. Each backend
// kept its own copy of these flags; one copy means a sandbox cannot be
// reused on one backend and not on another.
type SingleUse struct {
	mu        sync.Mutex
	used      bool
	destroyed bool
	err       error
}

// Use claims the sandbox for one job. It returns false when a job already
// claimed it or Destroy has begun: Exec then fails with KindLaunchFailed.
func (u *SingleUse) Use() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.used || u.destroyed {
		return false
	}
	u.used = true
	return true
}

// Destroy runs teardown on the first call and records its error. A later
// call does not wait for a teardown still running: it returns the error
// recorded so far (nil until the first call has finished), so that it never
// blocks behind a teardown bound to another caller's deadline.
func (u *SingleUse) Destroy(teardown func() error) error {
	u.mu.Lock()
	if u.destroyed {
		err := u.err
		u.mu.Unlock()
		return err
	}
	u.destroyed = true
	u.mu.Unlock()
	err := teardown()
	u.mu.Lock()
	u.err = err
	u.mu.Unlock()
	return err
}
