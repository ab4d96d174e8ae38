package main

import (
	"context"
	"debug/elf"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
	"golang.org/x/sys/unix"
)

var cliBin string

func TestMain(m *testing.M) { fixture.MainWithCLI(m, "bounded-query", &cliBin) }

const errLine = `{"status":"error"}` + "\n"

// runCLI runs the binary with the invariants of every run
// (fixture.RunCLI: exit 0, nothing on stderr, one line).
func runCLI(t *testing.T, env []string, stdin io.Reader, args ...string) string {
	t.Helper()
	return fixture.RunCLI(t, cliBin, env, stdin, args...)
}

// echoRuntime answers each job with its script (a test's script is its answer).
type echoRuntime = fixture.EchoRuntime

func startBroker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	a, err := broker.OpenAudit(filepath.Join(dir, "audit"), "q.jsonl")
	require.NoError(t, err)
	b, err := broker.New(broker.Options{Kind: broker.QueryKind{}, Runtime: echoRuntime{}, MaxInvocations: 100, Timeout: 5 * time.Second,
		Seeds: []broker.Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}, Audit: a})
	require.NoError(t, err)
	sock := filepath.Join(dir, "s.sock")
	ln, err := broker.ListenUnix(sock, os.Getuid(), os.Getgid())
	require.NoError(t, err)
	srv := broker.NewServer(b, a)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		a.Close()
	})
	return sock
}

func TestCLIAgainstBroker(t *testing.T) {
	sock := startBroker(t)
	env := []string{"AWF_BOUNDED_QUERY_SOCKET=" + sock}
	got := runCLI(t, env, strings.NewReader(`{"b": 2, "a": "x"}`), "--schema", `{"type":"object","fields":{"a":{"type":"enum","values":["x","y"]},"b":{"type":"integer","minimum":0,"maximum":3}}}`, "--repo", "o/r")
	assert.Equal(t, `{"status":"ok","result":{"a":"x","b":2}}`+"\n", got)
	// Failures from the broker are the same bytes as local ones.
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader("true"), "--repo", "o/unknown", "--schema", `{"type":"boolean"}`))
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader("maybe"), "--repo", "o/r", "--schema", `{"type":"boolean"}`))
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader("true"), "--repo", "o/r", "--schema", `{"type":"string"}`))
}

func TestCLIRejectsLocally(t *testing.T) {
	// No socket at all: any request that got past the local checks would
	// still print the error line, so use a socket that records connections.
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	contacted := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			contacted <- struct{}{}
			c.Close()
		}
	}()
	env := []string{"AWF_BOUNDED_QUERY_SOCKET=" + sock}
	b := `{"type":"boolean"}`
	cases := map[string][]string{
		"no args":          {},
		"only repo":        {"--repo", "o/r"},
		"only schema":      {"--schema", b},
		"repo twice":       {"--repo", "o/r", "--repo", "o/r", "--schema", b},
		"schema twice":     {"--repo", "o/r", "--schema", b, "--schema", b},
		"equals form":      {"--repo=o/r", "--schema", b},
		"double dash":      {"--repo", "o/r", "--schema", b, "--"},
		"short option":     {"-r", "o/r", "--schema", b},
		"positional":       {"--repo", "o/r", "--schema", b, "extra"},
		"unknown flag":     {"--repo", "o/r", "--schema", b, "--verbose"},
		"missing value":    {"--repo", "o/r", "--schema"},
		"bad slug":         {"--repo", "https://github.com/o/r", "--schema", b},
		"traversal":        {"--repo", "o/..", "--schema", b},
		"multiline slug":   {"--repo", "o/r\nx", "--schema", b},
		"empty schema":     {"--repo", "o/r", "--schema", ""},
		"schema too large": {"--repo", "o/r", "--schema", strings.Repeat(" ", 4097)},
		"help":             {"--help"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, errLine, runCLI(t, env, strings.NewReader("x"), args...))
		})
	}
	t.Run("empty stdin", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(""), "--repo", "o/r", "--schema", b))
	})
	t.Run("script too large", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(strings.Repeat("#", 65537)), "--repo", "o/r", "--schema", b))
	})
	t.Run("no socket env", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, nil, strings.NewReader("x"), "--repo", "o/r", "--schema", b))
	})
	t.Run("endpoint env", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, append(env, "AWF_BOUNDED_QUERY_ENDPOINT=http://host.docker.internal:1/query"), strings.NewReader("x"), "--repo", "o/r", "--schema", b))
	})
	t.Run("tty stdin", func(t *testing.T) {
		pty := openPTY(t)
		assert.Equal(t, errLine, runCLI(t, env, pty, "--repo", "o/r", "--schema", b))
	})
	assert.Empty(t, contacted, "a locally rejected request contacted the broker")
}

func openPTY(t *testing.T) *os.File {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// fakeServer answers every connection with one fixed response.
func fakeServer(t *testing.T, response string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 1<<16)
				_, _ = c.Read(buf)
				_, _ = io.WriteString(c, response)
			}()
		}
	}()
	return sock
}

func TestCLIUnexpectedResponses(t *testing.T) {
	resp := func(status, body string) string {
		return "HTTP/1.1 " + status + "\r\ncontent-type: application/json\r\ncontent-length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	cases := map[string]string{
		"500":              resp("500 Internal Server Error", `{"status":"error"}`),
		"odd body":         resp("200 OK", `{"status":"maybe"}`),
		"extra key":        resp("200 OK", `{"status":"error","why":"budget"}`),
		"newline in ok":    resp("200 OK", "{\"status\":\"ok\",\"result\":\n1}"),
		"truncated":        "HTTP/1.1 200 OK\r\ncontent-length: 40\r\n\r\n{\"status\":\"ok\"",
		"no length":        "HTTP/1.1 200 OK\r\n\r\n{\"status\":\"error\"}",
		"garbage":          "hello",
		"empty":            "",
		"ok prefix only":   resp("200 OK", `{"status":"ok","result":`),
		"trailing newline": resp("200 OK", "{\"status\":\"error\"}\n"),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			sock := fakeServer(t, r)
			got := runCLI(t, []string{"AWF_BOUNDED_QUERY_SOCKET=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`)
			assert.Equal(t, errLine, got)
		})
	}
	t.Run("broker down", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "gone.sock")
		ln, err := net.Listen("unix", sock)
		require.NoError(t, err)
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		got := runCLI(t, []string{"AWF_BOUNDED_QUERY_SOCKET=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`)
		assert.Equal(t, errLine, got)
	})
	t.Run("passes a canonical ok", func(t *testing.T) {
		sock := fakeServer(t, resp("200 OK", `{"status":"ok","result":[1,"a"]}`))
		got := runCLI(t, []string{"AWF_BOUNDED_QUERY_SOCKET=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`)
		assert.Equal(t, `{"status":"ok","result":[1,"a"]}`+"\n", got)
	})
}

func TestCLIIsStatic(t *testing.T) {
	f, err := elf.Open(cliBin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "bounded-query must be statically linked")
	}
}
