// Package mountinfo reads the kernel's mount table (proc(5),
// /proc/PID/mountinfo). It is the project's one reader of that format:
// the runtimes' unmount sweeps, cgroup-mode detection, the cgroup2 mount
// lookup and the host's orphan sweep all take their mounts from here, so
// the escaping rules and the line's shape are decided once.
package mountinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The tables a caller reads. A process whose threads may sit in different
// mount namespaces (libcontainer parks a thread in a finished container's
// namespace) reads Thread from a goroutine locked to its OS thread.
const (
	Self   = "/proc/self/mountinfo"
	Thread = "/proc/thread-self/mountinfo"
)

// maxLine bounds one line; the kernel's longest (a path of PATH_MAX,
// escaped four bytes a byte, plus options) stays well below it.
const maxLine = 1 << 20

// Mount is one line of the table, its paths unescaped.
type Mount struct {
	ID, Parent int
	Dev        string   // major:minor
	Root       string   // the path within its filesystem that is mounted
	Point      string   // the mount point, in the reader's mount namespace
	Options    []string // per-mount options (rw, nosuid, relatime, ...)
	Optional   []string // optional fields (shared:N, master:N, ...)
	FSType     string
	Source     string   // may be empty
	Super      []string // superblock options
}

// Below reports whether the mount point is dir or inside it.
func (m Mount) Below(dir string) bool {
	return m.Point == dir || strings.HasPrefix(m.Point, strings.TrimSuffix(dir, "/")+"/")
}

// Read parses the table at path (Self, Thread, or another process's).
func Read(path string) ([]Mount, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	ms, err := Parse(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %s: %w", path, err)
	}
	return ms, nil
}

// Parse reads every line of a table. A malformed line is an error rather
// than skipped: a sweep that overlooked a mount would leave it behind.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		if sc.Text() == "" {
			continue
		}
		m, err := ParseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseLine reads one line: "id parent major:minor root point options
// [optional fields...] - fstype source superoptions", fields separated by
// single spaces, with space, tab, newline and backslash in the text fields
// escaped as \ooo.
func ParseLine(line string) (Mount, error) {
	f := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) < sep+4 {
		return Mount{}, errors.New("not id parent dev root point options [optional...] - fstype source superoptions")
	}
	// A filesystem that prints an option with a raw space is read, not
	// refused: the superblock options are the rest of the line.
	f[sep+3] = strings.Join(f[sep+3:], " ")
	f = f[:sep+4]
	for i, v := range f {
		if v == "" && i != sep+2 { // only the source may be empty
			return Mount{}, fmt.Errorf("field %d is empty", i+1)
		}
	}
	id, err := number(f[0])
	if err != nil {
		return Mount{}, fmt.Errorf("mount id: %w", err)
	}
	parent, err := number(f[1])
	if err != nil {
		return Mount{}, fmt.Errorf("parent id: %w", err)
	}
	var optional []string
	if sep > 6 {
		optional = f[6:sep:sep]
	}
	return Mount{
		ID: id, Parent: parent, Dev: f[2],
		Root:     Unescape(f[3]),
		Point:    Unescape(f[4]),
		Options:  strings.Split(f[5], ","),
		Optional: optional,
		FSType:   Unescape(f[sep+1]),
		Source:   Unescape(f[sep+2]),
		Super:    strings.Split(f[sep+3], ","),
	}, nil
}

// number reads a mount id: decimal digits only.
func number(s string) (int, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return n, nil
}

// Unescape undoes the kernel's \ooo escapes (\040 for a space, \134 for a
// backslash). A backslash not followed by three octal digits of a byte
// stands for itself.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && '0' <= s[i+1] && s[i+1] <= '3' && octal(s[i+2]) && octal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(c byte) bool { return '0' <= c && c <= '7' }

// String renders m as the kernel would, escaping its text fields.
func (m Mount) String() string {
	f := []string{strconv.Itoa(m.ID), strconv.Itoa(m.Parent), m.Dev, escape(m.Root), escape(m.Point), strings.Join(m.Options, ",")}
	f = append(f, m.Optional...)
	f = append(f, "-", escape(m.FSType), escape(m.Source), strings.Join(m.Super, ","))
	return strings.Join(f, " ")
}

// escape is the kernel's mangle: space, tab, newline and backslash as \ooo.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
