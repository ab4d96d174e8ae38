package client

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Main is the main function of every agent CLI, so that the three keep one
// shape (DESIGN invariant 1: no channel but the one line): it points fd 2 at
// /dev/null, so that nothing, not even a runtime message, reaches the
// caller's stderr; it ignores SIGPIPE, so that a closed stdout cannot end
// the process with a signal; it prints exactly the one line run returns for
// the arguments, or errLine when run panics; and it always exits 0.
func Main(errLine string, run func(argv []string) string) {
	silenceStderr()
	signal.Ignore(syscall.SIGPIPE)
	_, _ = os.Stdout.WriteString(lineOf(errLine, run, os.Args[1:]) + "\n")
	os.Exit(0)
}

// lineOf is run(argv), or errLine when run panics.
func lineOf(errLine string, run func(argv []string) string, argv []string) (line string) {
	line = errLine
	defer func() { _ = recover() }()
	return run(argv)
}

// silenceStderr points fd 2 at /dev/null.
func silenceStderr() {
	if f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		_ = unix.Dup3(int(f.Fd()), 2, 0)
		f.Close()
	}
}

// Job is the one request an agent CLI sends: its route, its framing headers
// (sent in order) and the rules of its body, which is the CLI's standard
// input.
type Job struct {
	Route   string
	Headers [][2]string
	// MaxBody caps the body; an empty body is always refused.
	MaxBody int
	// UTF8 refuses a body that is not valid UTF-8 (a bounded agent's task
	// is text; a script is checked by the broker).
	UTF8 bool
}

// Send is an agent CLI's one exchange with its broker. socket is the
// broker's Unix socket as the CLI's environment names it: "" fails before
// anything is read. stdin holds the body and must not be a terminal (an
// agent that forgot the redirect would wait for ever). Send returns the
// response body, read within Deadline of the end of stdin.
func Send(socket string, stdin *os.File, j Job) ([]byte, error) {
	if socket == "" {
		return nil, errors.New("no broker socket")
	}
	if IsTerminal(int(stdin.Fd())) {
		return nil, errors.New("standard input is a terminal")
	}
	body, err := ReadBodyMax(stdin, j.MaxBody)
	if err != nil {
		return nil, err
	}
	if j.UTF8 && !utf8.Valid(body) {
		return nil, errors.New("body is not UTF-8")
	}
	return Exchange(socket, BuildRequestTo(j.Route, j.Headers, body), time.Now().Add(Deadline))
}
