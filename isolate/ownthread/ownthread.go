// Package ownthread starts child processes that carry a parent-death
// signal (SysProcAttr.Pdeathsig) from an OS thread of their own.
//
// The kernel sends the parent-death signal when the thread that forked the
// child ends, not when the process does. The Go runtime ends a thread
// whenever a goroutine exits while locked to it, which this project does on
// purpose (throwaway threads with changed credentials, affinity or
// namespaces) and libcontainer does on every container start. A child
// forked from such a thread is killed with it, long before its parent dies:
// an agent shim, a broker or a runsc process would vanish with SIGKILL.
// Start forks from a goroutine locked to a fresh thread that stays alive
// until the child has been reaped, so the signal fires only when the whole
// process is gone, which is what the callers mean by it.
//
// The package does nothing else: it does not set Pdeathsig, kill, or time
// out; cmd is configured and waited for as usual through the returned
// channel.
package ownthread

import (
	"os/exec"
	"runtime"
)

// Start starts cmd from a dedicated OS thread and returns a channel that
// receives cmd.Wait's result once the child has exited and been reaped.
// The caller must not call cmd.Wait itself. On a start error no channel is
// returned.
func Start(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, after the
		// child it forked has been reaped.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// Run starts cmd as Start does and waits for it, like cmd.Run.
func Run(cmd *exec.Cmd) error {
	done, err := Start(cmd)
	if err != nil {
		return err
	}
	return <-done
}
