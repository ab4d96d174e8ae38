// Package client is the agent side of the v2 protocol, shared by the tiny
// agent CLIs. It uses no net package (so the CLIs link statically with or
// without cgo) and never reports why something failed: every failure is the
// one canonical error line.
package client

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/proto"
)

// ErrorLine is what the CLI prints for every failure.
const ErrorLine = `{"status":"error"}`

const okPrefix = `{"status":"ok","result":`

// Limits of the agent CLI: the broker's, so that what the CLI sends the
// broker would not refuse for its size.
const (
	MaxSchemaBytes = proto.MaxSchemaBytes
	MaxBodyBytes   = proto.MaxScriptBytes
	// Deadline bounds one whole exchange: the 540 s timeout cap, the 600 s
	// final bucket and a margin.
	Deadline = 660 * time.Second
	// MaxResponseBytes bounds what is read back.
	MaxResponseBytes = 64 << 10
)

// Args are the CLI's two operands.
type Args struct {
	Repo   string
	Schema string
}

// ParseArgs accepts exactly --repo VALUE and --schema VALUE, once each, in
// either order. Everything else (other flags, --flag=value, --, short
// options, positionals, repeats) is refused.
func ParseArgs(argv []string) (Args, error) {
	var a Args
	var haveRepo, haveSchema bool
	for i := 0; i < len(argv); i++ {
		switch argv[i] {
		case "--repo", "--schema":
			if i+1 >= len(argv) {
				return Args{}, fmt.Errorf("%s needs a value", argv[i])
			}
			v := argv[i+1]
			i++
			if argv[i-1] == "--repo" {
				if haveRepo {
					return Args{}, errors.New("--repo given twice")
				}
				a.Repo, haveRepo = v, true
			} else {
				if haveSchema {
					return Args{}, errors.New("--schema given twice")
				}
				a.Schema, haveSchema = v, true
			}
		default:
			return Args{}, fmt.Errorf("unexpected argument %q", argv[i])
		}
	}
	switch {
	case !haveRepo || !haveSchema:
		return Args{}, errors.New("--repo and --schema are required")
	case proto.ValidateRepoSlug(a.Repo) != nil:
		// The broker's own rule, so a slug refused here would be refused there.
		return Args{}, errors.New("--repo is not an owner/repo slug")
	case a.Schema == "" || len(a.Schema) > MaxSchemaBytes:
		return Args{}, fmt.Errorf("--schema must be 1..%d bytes", MaxSchemaBytes)
	}
	return a, nil
}

// QueryHeaders returns the framing headers of a query for a: the names and
// the version are proto's, the ones the broker requires.
func QueryHeaders(a Args) [][2]string {
	return [][2]string{
		{proto.HeaderQueryVersion, proto.QueryVersionValue()},
		{proto.HeaderRepo, a.Repo},
		{proto.HeaderSchema, EncodeSchema(a.Schema)},
	}
}

// EncodeSchema is base64url without padding.
func EncodeSchema(schema string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(schema))
}

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// ReadBody reads stdin up to MaxBodyBytes; more, or nothing, is an error.
func ReadBody(r io.Reader) ([]byte, error) {
	return ReadBodyMax(r, MaxBodyBytes)
}

// ReadBodyMax is ReadBody with the cap of another job kind (a sealed
// probe's script may be larger than a query's).
func ReadBodyMax(r io.Reader, max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) == 0:
		return nil, errors.New("empty script")
	case len(b) > max:
		return nil, errors.New("script too large")
	}
	return b, nil
}

// BuildRequest frames one request to /query. headers are name/value pairs
// sent in order.
func BuildRequest(headers [][2]string, body []byte) []byte {
	return BuildRequestTo("/query", headers, body)
}

// BuildRequestTo frames one request to route (sealed probes use /probe).
func BuildRequestTo(route string, headers [][2]string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("POST " + route + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: awf-agent-cli\r\nAccept: */*\r\n")
	for _, h := range headers {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	b.WriteString("Content-Type: application/octet-stream\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// Exchange sends req over the Unix socket at path and returns the response
// body, all before deadline.
func Exchange(path string, req []byte, deadline time.Time) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return nil, errors.New("not a socket")
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "broker")
	defer f.Close()
	if err := connect(fd, path, deadline); err != nil {
		return nil, err
	}
	if err := f.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := f.Write(req); err != nil {
		return nil, err
	}
	return readResponse(bufio.NewReader(io.LimitReader(f, MaxResponseBytes)))
}

// connect connects a non-blocking socket, waiting for it until deadline.
func connect(fd int, path string, deadline time.Time) error {
	err := unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINPROGRESS) && !errors.Is(err, unix.EAGAIN) {
		return err
	}
	for {
		ms := time.Until(deadline).Milliseconds()
		if ms <= 0 {
			return errors.New("connect timeout")
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, int(min(ms, 1000)))
		if errors.Is(err, unix.EINTR) || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return err
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soErr != 0 {
			return unix.Errno(soErr)
		}
		return nil
	}
}

// readResponse reads a 200 response delimited by Content-Length, skipping
// 1xx interim responses.
func readResponse(br *bufio.Reader) ([]byte, error) {
	for {
		status, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		length := -1
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return nil, err
			}
			line = strings.TrimRight(line, "\r\n")
			if line == "" {
				break
			}
			name, value, _ := strings.Cut(line, ":")
			if strings.EqualFold(strings.TrimSpace(name), "content-length") {
				n, err := strconv.Atoi(strings.TrimSpace(value))
				if err != nil || n < 0 || length >= 0 {
					return nil, errors.New("bad content-length")
				}
				length = n
			}
		}
		if strings.HasPrefix(status, "HTTP/1.1 1") {
			continue
		}
		if !strings.HasPrefix(status, "HTTP/1.1 200 ") && !strings.HasPrefix(status, "HTTP/1.0 200 ") {
			return nil, errors.New("status is not 200")
		}
		if length < 0 || length > MaxResponseBytes {
			return nil, errors.New("no usable content-length")
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil, err
		}
		return body, nil
	}
}

// Canonical returns body when it is exactly the error envelope or a
// single-line success envelope, else the local error line.
func Canonical(body []byte) string {
	s := string(body)
	if s == ErrorLine {
		return s
	}
	if strings.HasPrefix(s, okPrefix) && strings.HasSuffix(s, "}") && len(s) > len(okPrefix)+1 &&
		!strings.ContainsAny(s, "\r\n") && utf8Valid(body) {
		return s
	}
	return ErrorLine
}

func utf8Valid(b []byte) bool { return strings.ToValidUTF8(string(b), "\uFFFD") == string(b) }
