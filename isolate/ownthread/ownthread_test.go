package ownthread

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endThread runs a goroutine that exits locked to its thread, which makes
// the Go runtime end that thread, as libcontainer and the agent shim's
// throwaway threads do.
func endThread() {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(done)
	}()
	<-done
}

func sleeper() *exec.Cmd {
	cmd := exec.Command("/bin/sleep", "2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// TestChildOutlivesEndedThreads: a child started through Start keeps
// running while many threads of this process end; the weakened twin, a
// child started from a thread that then ends, is killed by its
// parent-death signal.
func TestChildOutlivesEndedThreads(t *testing.T) {
	cmd := sleeper()
	done, err := Start(cmd)
	require.NoError(t, err)
	for i := 0; i < 64; i++ {
		endThread()
	}
	require.NoError(t, <-done, "the child must exit normally, not by its parent-death signal")

	// Weakened twin: fork from a goroutine whose locked thread then ends.
	twin := sleeper()
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		started <- twin.Start()
	}()
	require.NoError(t, <-started)
	err = twin.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the twin's child must be killed when its thread ends")
	ws := ee.Sys().(syscall.WaitStatus)
	assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed by the parent-death signal: %v", err)
}

func TestStartError(t *testing.T) {
	_, err := Start(exec.Command("/nonexistent/awf-binary"))
	require.Error(t, err)
	require.Error(t, Run(exec.Command("/nonexistent/awf-binary")))
	require.NoError(t, Run(exec.Command("/bin/true")))
}
