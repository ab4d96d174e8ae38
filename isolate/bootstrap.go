package isolate

import (
	_ "embed"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// bootstrapSource is the interpreter's bootstrap, a reviewed file like the
// policies: it preloads the modules a script usually imports, waits for the
// script on an inherited descriptor, and runs it as the interpreter would
// run ScriptPath. It also ends like that interpreter: when nothing the
// interpreter's finalisation would still do can be observed (no open or
// unflushed file, finaliser, thread or hook of the script's left; the
// bootstrap's comment lists the checks), it ends with os._exit after the
// threads are joined, the atexit callbacks have run and the standard
// streams are flushed, which saves the several milliseconds of tearing every
// module down; otherwise the interpreter finalises as usual.
//
//go:embed bootstrap.py
var bootstrapSource string

// BootstrapFD is the descriptor a backend that can pass one beyond stdio
// gives the bootstrap: the read end of a pipe whose write end the runtime
// keeps. The bootstrap closes it before the script runs, so the script's
// descriptors are those of a cold interpreter. A backend that can pass
// only stdio uses 0; the bootstrap then reopens /dev/null there.
const BootstrapFD = 3

// MaxBootstrapScript bounds what HandScript sends (the runtimes' own
// limit on a script).
const MaxBootstrapScript = 1 << 20

// BootstrapArgv returns the argv of a bounded query's interpreter: the
// rootfs python3 with DefaultArgv's flags, running the bootstrap, which
// waits for its script on descriptor fd. It is the one way a backend
// launches a job whose Argv is empty or DefaultArgv (IsDefaultArgv), for a
// sandbox prepared ahead of its request and for a cold run alike, so that a
// script cannot tell one from the other: the same modules loaded, the same
// argv, descriptors, environment and frames. A fresh slice each call.
//
// The interpreter may start as soon as the sandbox exists, under every
// control; it does nothing the script can observe until HandScript.
func BootstrapArgv(fd int) []string {
	argv := DefaultArgv()
	argv = argv[:len(argv)-1]
	return append(argv, "-c", bootstrapSource, strconv.Itoa(fd), ScriptPath)
}

// IsDefaultArgv reports whether a job's argv means the default interpreter
// (empty or DefaultArgv), which backends run through BootstrapArgv.
func IsDefaultArgv(argv []string) bool {
	return len(argv) == 0 || slices.Equal(argv, DefaultArgv())
}

// HandScript writes script to w, the write end of the bootstrap's
// descriptor, in its framing: the length in ASCII decimal and a newline,
// then the bytes. The caller places the same bytes read-only at ScriptPath
// first, and closes w afterwards. A write blocks while the pipe is full
// and the bootstrap has not read yet; the caller bounds it (the wall-clock
// deadline starts here).
func HandScript(w io.Writer, script []byte) error {
	if len(script) > MaxBootstrapScript {
		return fmt.Errorf("bootstrap: script of %d bytes is over %d", len(script), MaxBootstrapScript)
	}
	msg := make([]byte, 0, len(script)+16)
	msg = strconv.AppendInt(msg, int64(len(script)), 10)
	msg = append(msg, '\n')
	msg = append(msg, script...)
	n, err := w.Write(msg)
	if err == nil && n != len(msg) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("bootstrap: hand over the script: %w", err)
	}
	return nil
}
