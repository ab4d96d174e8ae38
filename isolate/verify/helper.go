package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/policy"
)

// filterHelperEnv turns a binary that calls HelperIfRequested into the
// filter-reading helper for the pid it names.
const filterHelperEnv = "_AWF_VERIFY_READ_FILTER_PID"

// HelperIfRequested must be called from an init function of every binary
// that runs verify (the awf command and this package's tests). When the
// process was started as verify's filter-reading helper, it reads the
// seccomp filters of the named pid, writes them to stdout and exits; it
// never returns.
//
// The filter is read from a separate process because ptrace makes the
// reader the tracee's tracer: a tracer's wait calls see the tracee's
// ptrace-stops, and the runtime that started the sandboxed process waits
// for it in the same process as verify. A stop it saw would look to it
// like the job had ended.
func HelperIfRequested() {
	v := os.Getenv(filterHelperEnv)
	if v == "" {
		return
	}
	runtime.LockOSThread()
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		fmt.Fprintf(os.Stdout, "ERR bad pid %q\n", v)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	progs, err := policy.ReadFilters(ctx, pid)
	cancel()
	w := bufio.NewWriter(os.Stdout)
	if err != nil {
		fmt.Fprintf(w, "ERR %v\n", err)
	} else {
		fmt.Fprintf(w, "OK %d\n", len(progs))
		for _, p := range progs {
			var n [4]byte
			binary.LittleEndian.PutUint32(n[:], uint32(len(p)))
			w.Write(n[:])
			w.Write(policy.EncodeProgram(p))
		}
	}
	if w.Flush() != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// readFilters returns every seccomp filter attached to pid, newest first.
// It runs the helper (this same executable) as root and parses its answer.
func readFilters(ctx context.Context, pid int) ([][]unix.SockFilter, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Env = []string{filterHelperEnv + "=" + strconv.Itoa(pid)}
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &out, max: policy.MaxFilters * (policy.MaxBPFInstructions*8 + 4)}
	cmd.Stderr = io.Discard
	if err := cmd.Run(); err != nil && out.Len() == 0 {
		return nil, fmt.Errorf("filter helper: %w", err)
	}
	return parseHelperOutput(out.Bytes())
}

// parseHelperOutput decodes "OK N\n" followed by N length-prefixed programs,
// or "ERR message\n".
func parseHelperOutput(b []byte) ([][]unix.SockFilter, error) {
	line, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, errors.New("filter helper: no answer")
	}
	if msg, isErr := bytes.CutPrefix(line, []byte("ERR ")); isErr {
		return nil, errors.New(string(msg))
	}
	cnt, isOK := bytes.CutPrefix(line, []byte("OK "))
	n, err := strconv.Atoi(string(cnt))
	if !isOK || err != nil || n < 0 || n > policy.MaxFilters {
		return nil, fmt.Errorf("filter helper: bad header %q", line)
	}
	var progs [][]unix.SockFilter
	for i := 0; i < n; i++ {
		if len(rest) < 4 {
			return nil, errors.New("filter helper: truncated answer")
		}
		insns := int(binary.LittleEndian.Uint32(rest))
		rest = rest[4:]
		if insns <= 0 || insns > policy.MaxBPFInstructions || len(rest) < insns*8 {
			return nil, errors.New("filter helper: truncated program")
		}
		p, err := policy.DecodeProgram(rest[:insns*8])
		if err != nil {
			return nil, fmt.Errorf("filter helper: %w", err)
		}
		progs = append(progs, p)
		rest = rest[insns*8:]
	}
	return progs, nil
}

// limitedBuffer stops accepting bytes past max.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.max {
		return 0, errors.New("filter helper: answer too large")
	}
	return l.buf.Write(p)
}
