package agentloop

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/proto"
)

// StartFD is the descriptor on which the loop waits for its invocation
// (isolate.BootstrapFD): a backend that starts the loop ahead of its
// invocation (direct, for a prepared enclave and a cold one alike) passes
// the read end of a pipe there and writes the start message only once the
// invocation's files are in place; a backend that starts the loop at the
// invocation passes nothing there. The backend says which it does in
// proto.EnclaveStartEnv.
const StartFD = 3

// ExitNoStart is Main's caller's status when the start never came: the
// broker's handover failed, and the loop read none of its inputs.
const ExitNoStart = 40

// maxStartMessage bounds the start message the loop reads: the handover's
// framing (isolate.HandScript) of no bytes, "0\n".
const maxStartMessage = 16

// AwaitHandedStart waits for the start (AwaitStart on StartFD) when the
// backend says it hands one (proto.EnclaveStartEnv names StartFD), and
// returns at once when the variable is absent: a program started at its
// invocation. Any other value is an error: the loop must not run.
func AwaitHandedStart() error {
	v, ok := os.LookupEnv(proto.EnclaveStartEnv)
	if !ok {
		return nil
	}
	if v != strconv.Itoa(StartFD) {
		return fmt.Errorf("%s=%q: want %d", proto.EnclaveStartEnv, v, StartFD)
	}
	return AwaitStart(StartFD)
}

// AwaitStart blocks until the invocation's start arrives on fd, then
// closes fd, so that what runs next has the descriptors of a loop started
// at its invocation. It is called before anything reads an input: until
// the start, the loop has only initialised what does not depend on the
// invocation (the runtime, the code). Anything else than exactly the
// empty start message on a pipe (no descriptor, another kind of
// descriptor, an end of file, a read error, any byte of payload) is an
// error: the loop must not run.
func AwaitStart(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("start descriptor: %w", err)
	}
	defer unix.Close(fd)
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return errors.New("start descriptor is not a pipe")
	}
	// One byte at a time: nothing past the newline is consumed.
	var msg []byte
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("read the start: %w", err)
		case n == 0:
			return errors.New("the start descriptor closed before the start")
		}
		if b[0] == '\n' {
			break
		}
		if msg = append(msg, b[0]); len(msg) >= maxStartMessage {
			return errors.New("the start message is too long")
		}
	}
	if string(msg) != "0" {
		return fmt.Errorf("the start message %q is not the empty start", msg)
	}
	return nil
}
