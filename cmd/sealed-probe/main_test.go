package main

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/proto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
)

var cliBin string

func TestMain(m *testing.M) { fixture.MainWithCLI(m, "sealed-probe", &cliBin) }

const errLine = `{"result":"ERROR"}` + "\n"

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
	a, err := broker.OpenAudit(filepath.Join(dir, "audit"), "p.jsonl")
	require.NoError(t, err)
	b, err := broker.New(broker.Options{Kind: broker.ProbeKind{}, Runtime: echoRuntime{}, MaxInvocations: 100, Timeout: 5 * time.Second,
		Seeds: []broker.Seed{{Repo: "o/r", Dir: "/s", Sensitivity: proto.SensitivitySealed}}, Audit: a})
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

var three = []string{"--outcome", "YES", "--outcome", "NO", "--outcome", "UNKNOWN"}

func TestCLIAgainstBroker(t *testing.T) {
	sock := startBroker(t)
	env := []string{proto.ProbeSocketEnv + "=" + sock}
	args := append([]string{"--repo", "o/r"}, three...)
	assert.Equal(t, `{"result":"NO"}`+"\n", runCLI(t, env, strings.NewReader(`{ "result" : "NO" }`), args...))
	// UTF-8 outcomes, and flags in any order.
	assert.Equal(t, `{"result":"ja é"}`+"\n", runCLI(t, env, strings.NewReader(`{"result":"ja é"}`),
		"--outcome", "ja é", "--repo", "o/r", "--outcome", "nein", "--outcome", "?"))
	// Failures from the broker are the same bytes as local ones.
	for _, out := range []string{`{"result":"ERROR"}`, `{"result":"MAYBE"}`, `{"result":"NO","x":1}`, `{"result":"NO","result":"NO"}`, `not json`} {
		assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(out), args...), out)
	}
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(`{"result":"NO"}`), append([]string{"--repo", "o/unknown"}, three...)...))
}

// TestCLIRejectsLocally: every malformed invocation prints the error line
// without contacting the broker.
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
	env := []string{proto.ProbeSocketEnv + "=" + sock}
	o := func(v ...string) []string {
		var out []string
		for _, s := range v {
			out = append(out, "--outcome", s)
		}
		return out
	}
	r := []string{"--repo", "o/r"}
	cases := map[string][]string{
		"no args":         {},
		"no repo":         o("A", "B", "C"),
		"two outcomes":    append(r, o("A", "B")...),
		"four outcomes":   append(r, o("A", "B", "C", "D")...),
		"duplicate":       append(r, o("A", "B", "A")...),
		"ERROR":           append(r, o("A", "B", "ERROR")...),
		"empty outcome":   append(r, o("A", "B", "")...),
		"long outcome":    append(r, o("A", "B", strings.Repeat("x", 65))...),
		"control":         append(r, o("A", "B", "C\tD")...),
		"newline":         append(r, o("A", "B", "C\nD")...),
		"leading space":   append(r, o("A", "B", " C")...),
		"repo twice":      append(append(r, r...), o("A", "B", "C")...),
		"repo url":        append([]string{"--repo", "https://github.com/o/r"}, o("A", "B", "C")...),
		"repo traversal":  append([]string{"--repo", "o/.."}, o("A", "B", "C")...),
		"equals form":     append([]string{"--repo=o/r"}, o("A", "B", "C")...),
		"double dash":     append(append(r, o("A", "B", "C")...), "--"),
		"positional":      append(append(r, o("A", "B", "C")...), "probe.py"),
		"schema flag":     append(append(r, o("A", "B", "C")...), "--schema", "{}"),
		"image flag":      append(append(r, o("A", "B", "C")...), "--image", "python:3"),
		"runtime flag":    append(append(r, o("A", "B", "C")...), "--runtime", "direct"),
		"timeout flag":    append(append(r, o("A", "B", "C")...), "--timeout", "5"),
		"socket flag":     append(append(r, o("A", "B", "C")...), "--socket", sock),
		"missing value":   append(r, "--outcome"),
		"short option":    append([]string{"-r", "o/r"}, o("A", "B", "C")...),
		"env flag":        append(append(r, o("A", "B", "C")...), "--env", "X=1"),
		"ref flag":        append(append(r, o("A", "B", "C")...), "--ref", "main"),
		"command flag":    append(append(r, o("A", "B", "C")...), "--command", "sh"),
		"credential flag": append(append(r, o("A", "B", "C")...), "--token", "x"),
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, errLine, runCLI(t, env, strings.NewReader("print(1)"), args...))
		})
	}
	ok := append(r, o("A", "B", "C")...)
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(""), ok...), "empty script")
	assert.Equal(t, errLine, runCLI(t, env, strings.NewReader(strings.Repeat("#", proto.MaxProbeScriptBytes+1)), ok...), "oversized script")
	assert.Equal(t, errLine, runCLI(t, nil, strings.NewReader("x"), ok...), "no socket variable")
	assert.Empty(t, contacted, "the broker must not be contacted")
}

// TestCLITransportFailures: an unreachable socket or an unexpected answer
// is the local error line, formatted and exited the same way.
func TestCLITransportFailures(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"--repo", "o/r"}, three...)
	assert.Equal(t, errLine, runCLI(t, []string{proto.ProbeSocketEnv + "=" + filepath.Join(dir, "missing.sock")}, strings.NewReader("x"), args...))
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o600))
	assert.Equal(t, errLine, runCLI(t, []string{proto.ProbeSocketEnv + "=" + plain}, strings.NewReader("x"), args...))
	for _, body := range []string{`{"result":"MAYBE"}`, `{"result":"YES"} `, `{"status":"error"}`, `{"result":"YES"}` + "\n", ``, `{"result":"YES"}x`} {
		sock := filepath.Join(t.TempDir(), "odd.sock")
		ln, err := net.Listen("unix", sock)
		require.NoError(t, err)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\ncontent-length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		}()
		assert.Equal(t, errLine, runCLI(t, []string{proto.ProbeSocketEnv + "=" + sock}, strings.NewReader("x"), args...), body)
		ln.Close()
	}
}

// TestReferenceClientShape: a request shaped as the reference's curl-based
// client sends it (headers, route, body, no Expect) gets its outcome.
func TestReferenceClientShape(t *testing.T) {
	sock := startBroker(t)
	cmd := exec.Command("curl", "--silent", "--show-error", "--noproxy", "*", "--unix-socket", sock, "--max-time", "30",
		"-X", "POST", "-H", "Expect:", "-H", "Content-Type: application/octet-stream",
		"-H", "X-AWF-Probe-Version: 1", "-H", "X-AWF-Repo: o/r",
		"-H", "X-AWF-Outcome-1: YES", "-H", "X-AWF-Outcome-2: NO", "-H", "X-AWF-Outcome-3: UNKNOWN",
		"--data-binary", "@-", "http://localhost/probe")
	cmd.Stdin = strings.NewReader(`{"result":"UNKNOWN"}`)
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Equal(t, `{"result":"UNKNOWN"}`, string(out))
}
