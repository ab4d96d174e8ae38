package main

import (
	"bytes"
	"context"
	"debug/elf"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

var cliBin string

func TestMain(m *testing.M) { fixture.MainWithCLI(m, "bounded-agent", &cliBin) }

const errLine = `{"status":"error"}` + "\n"

// runCLI runs the binary with the invariants of every run
// (fixture.RunCLI: exit 0, nothing on stderr, one line).
func runCLI(t *testing.T, env []string, stdin io.Reader, args ...string) string {
	t.Helper()
	return fixture.RunCLI(t, cliBin, env, stdin, args...)
}

func TestFramingIsTheBrokers(t *testing.T) {
	assert.Equal(t, []string{headerAgentVersion, proto.HeaderRepo, proto.HeaderSchema}, broker.AgentHeaderNames())
	assert.Equal(t, broker.AgentVersionValue, agentVersion)
	assert.Equal(t, broker.MaxAgentTaskBytes, maxTaskBytes)
}

// taskRuntime answers every enclave with the task text as its result, so
// that the test sees exactly what reached the broker.
type taskRuntime struct{}

func (taskRuntime) Name() string                { return "task-echo" }
func (taskRuntime) Probe(context.Context) error { return nil }
func (taskRuntime) Sweep(context.Context) error { return nil }
func (taskRuntime) Usable() error               { return nil }
func (taskRuntime) Close() error                { return nil }
func (taskRuntime) Prepare(context.Context, isolate.Template) (isolate.Sandbox, error) {
	return nil, nil
}
func (taskRuntime) Run(context.Context, isolate.Spec) isolate.Outcome {
	return isolate.Err(isolate.KindLaunchFailed, "not an enclave")
}
func (taskRuntime) RunEnclave(_ context.Context, _ isolate.Template, e broker.Enclave) broker.EnclaveOutcome {
	for _, f := range e.Files {
		if f.Path == broker.EnclaveTaskPath {
			return broker.EnclaveOutcome{Outcome: isolate.Outcome{Kind: isolate.KindOK, Output: f.Content}}
		}
	}
	return broker.EnclaveOutcome{Outcome: isolate.Err(isolate.KindOutputMissing, "no task")}
}

type issuer struct{}

func (issuer) Issue(context.Context, string, int, int) (string, error) {
	return "awf-cap-" + strings.Repeat("0", 64), nil
}
func (issuer) Revoke(context.Context, string) error { return nil }

func startBroker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	a, err := broker.OpenAudit(filepath.Join(dir, "audit"), "bounded-agent.jsonl")
	require.NoError(t, err)
	k, err := broker.NewAgentKind(broker.AgentOptions{
		MaxTaskBytes: 4096, MaxOutputBytes: 8192, Profile: "openai", Model: "m",
		Proxy: netip.MustParseAddrPort("169.254.77.1:8080"), MaxModelRequests: 8, MaxModelTokens: 1024,
		Timeout: 5 * time.Second, Limits: isolate.DefaultLimits(), LoopBinary: "/loop", Issuer: issuer{},
		TranscriptDir: filepath.Join(dir, "audit", "transcripts"),
	})
	require.NoError(t, err)
	b, err := broker.New(broker.Options{Kind: k, Runtime: taskRuntime{}, MaxInvocations: 100, Timeout: 5 * time.Second,
		Template: isolate.Template{Limits: isolate.DefaultLimits()},
		Seeds:    []broker.Seed{{Repo: "o/r", Dir: "/s", Sensitivity: "public"}}, Audit: a})
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
	env := []string{envSocket + "=" + sock}
	enum := `{"type":"enum","values":["net","store","api","none"]}`
	assert.Equal(t, `{"status":"ok","result":"store"}`+"\n", runCLI(t, env, strings.NewReader(`"store"`), "--repo", "o/r", "--schema", enum))
	assert.Equal(t, `{"status":"ok","result":"net"}`+"\n", runCLI(t, env, strings.NewReader(` "net" `), "--schema", enum, "--repo", "O/R"))
	// Failures from the broker are the same bytes as local ones.
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(`"net"`), "--repo", "o/unknown", "--schema", enum))
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(`"web"`), "--repo", "o/r", "--schema", enum))
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(`"net"`), "--repo", "o/r", "--schema", `{"type":"string"}`))
	// The broker's task cap (4096) applies even when the CLI's is higher.
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(`"net"`+strings.Repeat(" ", 4096)), "--repo", "o/r", "--schema", enum))
}

func TestCLIRejectsLocally(t *testing.T) {
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
	env := []string{envSocket + "=" + sock}
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
		"model":            {"--repo", "o/r", "--schema", b, "--model", "gpt-4o"},
		"runtime":          {"--repo", "o/r", "--schema", b, "--runtime", "docker"},
		"tool":             {"--repo", "o/r", "--schema", b, "--tool", "shell"},
		"endpoint":         {"--repo", "o/r", "--schema", b, "--endpoint", "http://x"},
		"task flag":        {"--repo", "o/r", "--schema", b, "--task", "x"},
		"missing value":    {"--repo", "o/r", "--schema"},
		"bad slug":         {"--repo", "https://github.com/o/r", "--schema", b},
		"traversal":        {"--repo", "o/..", "--schema", b},
		"empty schema":     {"--repo", "o/r", "--schema", ""},
		"schema too large": {"--repo", "o/r", "--schema", strings.Repeat(" ", 4097)},
		"help":             {"--help"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, errLine, runCLI(t, env, strings.NewReader("x"), args...))
		})
	}
	ok := []string{"--repo", "o/r", "--schema", b}
	t.Run("empty stdin", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(""), ok...))
	})
	t.Run("task over the hard cap", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(strings.Repeat("a", 65537)), ok...))
	})
	t.Run("task over the configured cap", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, append(env, envMaxTaskBytes+"=10"), strings.NewReader(strings.Repeat("a", 11)), ok...))
	})
	t.Run("bad configured cap", func(t *testing.T) {
		for _, v := range []string{"0", "-1", "65537", "x", "10 "} {
			assert.Equal(t, errLine, runCLI(t, append(env, envMaxTaskBytes+"="+v), strings.NewReader("a"), ok...), v)
		}
	})
	t.Run("invalid utf8", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, env, bytes.NewReader([]byte{'a', 0xff}), ok...))
	})
	t.Run("no socket env", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, nil, strings.NewReader("x"), ok...))
	})
	t.Run("the query socket is not the agent's", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, []string{"AWF_BOUNDED_QUERY_SOCKET=" + sock}, strings.NewReader("x"), ok...))
	})
	t.Run("tty stdin", func(t *testing.T) {
		assert.Equal(t, errLine, runCLI(t, env, openPTY(t), ok...))
	})
	assert.Empty(t, contacted, "a locally rejected request contacted the broker")

	// Within the configured cap it is sent.
	runCLI(t, append(env, envMaxTaskBytes+"=10"), strings.NewReader(strings.Repeat("a", 10)), ok...)
	select {
	case <-contacted:
	case <-time.After(5 * time.Second):
		t.Fatal("a valid request did not reach the socket")
	}
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

func TestCLIOddResponsesAreTheErrorLine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Read(make([]byte, 1<<16))
				body := `{"status":"error","why":"budget"}`
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\ncontent-length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			}()
		}
	}()
	assert.Equal(t, errLine, runCLI(t, []string{envSocket + "=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`))
}

func TestCLIIsStatic(t *testing.T) {
	f, err := elf.Open(cliBin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "bounded-agent must be statically linked")
	}
}
