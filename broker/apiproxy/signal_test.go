package apiproxy

import (
	"os"
	"os/signal"
	"syscall"
)

func notifyTerm(ch chan os.Signal) { signal.Notify(ch, syscall.SIGTERM, os.Interrupt) }
