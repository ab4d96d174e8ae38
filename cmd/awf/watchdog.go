package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/awf-project/awf/broker/host"
)

func init() {
	// The parent-death signal of a child fires when the thread that
	// started it exits, not the process: awf run starts its broker and
	// agent from the main goroutine, which this keeps on the main thread,
	// and the main thread lives exactly as long as the process.
	runtime.LockOSThread()
}

// watchdogMode is the hidden mode "awf run --watchdog PRIVATE INGRESS
// ARCHIVE RUNID", started by awf run with the read end of its pipe as fd 3
// (host.StartWatchdog).
func watchdogMode(e env) int {
	if len(e.args) != 5 {
		fmt.Fprintln(e.stderr, "awf run: watchdog: usage: --watchdog PRIVATE INGRESS ARCHIVE RUNID")
		return exitAWF
	}
	// Its own session already; a broken stderr must not kill it mid-reclaim.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTERM)
	pipe := os.NewFile(3, "watchdog-pipe")
	if pipe == nil {
		fmt.Fprintln(e.stderr, "awf run: watchdog: no pipe on fd 3")
		return exitAWF
	}
	if err := host.RunWatchdog(pipe, e.args[1], e.args[2], e.args[3], e.args[4], e.stderr); err != nil {
		return exitAWF
	}
	return 0
}
