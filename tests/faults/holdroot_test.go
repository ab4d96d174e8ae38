package faults

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// holdRoot takes run runID's lifetime lock as soon as the run lets go of
// it, and keeps it until the returned release is called (or the test
// ends). A run whose runtime cannot be swept (its Engine killed, its
// sandbox wedged) keeps its private root, and every awf run's start-up
// sweep refuses to start while such a root exists: by design, since its
// sandboxes may still run. Held, the root counts as a live run's, so the
// other test packages' awf runs on this shared host are not stopped
// during the window in which this test restores the runtime; released,
// the test's own next run sweeps it as the product would.
func holdRoot(t *testing.T, runID string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(privateBase, runID, "run.lock"), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("hold run %s: %v", runID, err)
	}
	got := make(chan struct{})
	go func() {
		// Blocks until the run's own lock is released.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX) == nil {
			close(got)
		}
	}()
	var once sync.Once
	release = func() {
		once.Do(func() {
			// Closing the descriptor drops the lock, or ends a wait for it
			// only once the run exits; either way nothing is held after.
			f.Close()
		})
	}
	t.Cleanup(release)
	return release
}
