package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/tests/fixture"
)

var cli fixture.CLI

func TestMain(m *testing.M) { fixture.MainWithCLI(m, "sealed-probe", &cli.Bin) }

// errLine is every failure's line.
const errLine = proto.ProbeErrorBody + "\n"

var three = []string{"--outcome", "YES", "--outcome", "NO", "--outcome", "UNKNOWN"}

func TestCLIAgainstBroker(t *testing.T) {
	sock := fixture.ServeEchoBroker(t, broker.ProbeKind{}, proto.SensitivitySealed)
	env := []string{proto.ProbeSocketEnv + "=" + sock}
	args := append([]string{"--repo", "o/r"}, three...)
	assert.Equal(t, `{"result":"NO"}`+"\n", cli.Run(t, env, strings.NewReader(`{ "result" : "NO" }`), args...))
	// UTF-8 outcomes, and flags in any order.
	assert.Equal(t, `{"result":"ja é"}`+"\n", cli.Run(t, env, strings.NewReader(`{"result":"ja é"}`),
		"--outcome", "ja é", "--repo", "o/r", "--outcome", "nein", "--outcome", "?"))
	// Failures from the broker are the same bytes as local ones.
	for _, out := range []string{`{"result":"ERROR"}`, `{"result":"MAYBE"}`, `{"result":"NO","x":1}`, `{"result":"NO","result":"NO"}`, `not json`} {
		assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(out), args...), out)
	}
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(`{"result":"NO"}`), append([]string{"--repo", "o/unknown"}, three...)...))
}

// TestCLIRejectsLocally: every malformed invocation prints the error line
// without contacting the broker.
func TestCLIRejectsLocally(t *testing.T) {
	sock, contacted := fixture.RecordingSocket(t)
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
			assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader("print(1)"), args...))
		})
	}
	ok := append(r, o("A", "B", "C")...)
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(""), ok...), "empty script")
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(strings.Repeat("#", proto.MaxProbeScriptBytes+1)), ok...), "oversized script")
	assert.Equal(t, errLine, cli.Run(t, nil, strings.NewReader("x"), ok...), "no socket variable")
	assert.Equal(t, errLine, cli.Run(t, env, fixture.OpenPTY(t), ok...), "terminal stdin")
	assert.Empty(t, contacted, "the broker must not be contacted")
}

func TestCLIIsStatic(t *testing.T) { fixture.RequireStatic(t, cli.Bin) }

// TestCLITransportFailures: an unreachable socket or an unexpected answer
// is the local error line, formatted and exited the same way.
func TestCLITransportFailures(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"--repo", "o/r"}, three...)
	assert.Equal(t, errLine, cli.Run(t, []string{proto.ProbeSocketEnv + "=" + filepath.Join(dir, "missing.sock")}, strings.NewReader("x"), args...))
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o600))
	assert.Equal(t, errLine, cli.Run(t, []string{proto.ProbeSocketEnv + "=" + plain}, strings.NewReader("x"), args...))
	for _, body := range []string{`{"result":"MAYBE"}`, `{"result":"YES"} `, `{"status":"error"}`, `{"result":"YES"}` + "\n", ``, `{"result":"YES"}x`} {
		sock := fixture.AnsweringSocket(t, fixture.HTTPResponse("200 OK", body))
		assert.Equal(t, errLine, cli.Run(t, []string{proto.ProbeSocketEnv + "=" + sock}, strings.NewReader("x"), args...), body)
	}
}

// TestReferenceClientShape: a request shaped as the reference's curl-based
// client sends it (headers, route, body, no Expect) gets its outcome.
func TestReferenceClientShape(t *testing.T) {
	sock := fixture.ServeEchoBroker(t, broker.ProbeKind{}, proto.SensitivitySealed)
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
