// Package jsonfile owns the JSON files awf keeps in its private root: the
// JSON-line audit logs it appends to (the broker's and the API proxy's) and
// the spec files awf writes for a process it starts, which that process
// reads back. Every one is 0600 and never opened through a symbolic link.
//
// It does not make or check the directories the files are in (their owners
// lay out the private root), and it does not know any record's or spec's
// shape. It imports no other package of awf, so that the broker and the API
// proxy, neither of which imports the other, can share it.
package jsonfile

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unicode/utf8"
)

// Clip shortens s to at most n bytes on a rune boundary, so that a field
// written to a log stays bounded. A string of at most n bytes is returned
// as it is; a longer one is cut at n bytes and then shortened until it is
// valid UTF-8, so a prefix with an invalid byte early in it may end up
// empty.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// OpenAppend opens path for appending: created 0600, never through a
// symbolic link, and set back to 0600 if it existed with another mode. Its
// errors are the os package's, which name path; callers add what the file
// is.
func OpenAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Log appends records to a writer, one JSON line each, from any goroutine;
// each line is written whole by a single Write.
type Log struct {
	mu sync.Mutex // guards w
	w  io.Writer
	// who begins the message of a failed write ("awf broker").
	who string
}

// NewLog returns a Log on w. who names the writing process in the message
// that reports a failed write on standard error.
func NewLog(w io.Writer, who string) *Log { return &Log{w: w, who: who} }

// Append writes v as one line. No failure reaches the caller, because an
// audit record must never fail the request it records: a value that does
// not marshal is dropped, and a failed write is reported on standard error
// as "WHO: audit write failed: ERR".
func (l *Log) Append(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(line, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "%s: audit write failed: %v\n", l.who, err)
	}
}

// Close closes the writer, if it is an io.Closer, once no Append is
// writing; a later Append reports a failed write.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// MaxSpecBytes caps what ReadSpec reads. A spec holds paths and limits, a
// few KiB; a larger file is not one awf wrote.
const MaxSpecBytes = 1 << 20

// WriteSpec writes v as indented JSON to path, which must not exist yet:
// created 0600, exclusively, never through a symbolic link. what names the
// spec in errors ("broker spec").
func WriteSpec(path, what string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", what, err)
	}
	return f.Close()
}

// ReadSpec decodes the spec at path into v, refusing unknown fields and
// reading at most MaxSpecBytes. The file must be a regular file owned by
// root and closed to others, as WriteSpec run by root leaves it: a spec says
// what a root process will do, so nobody else may have written it. what
// names the spec in errors ("broker spec").
func ReadSpec(path, what string, v any) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s %s: must be a regular root-owned file closed to others", what, path)
	}
	dec := json.NewDecoder(io.LimitReader(f, MaxSpecBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}
