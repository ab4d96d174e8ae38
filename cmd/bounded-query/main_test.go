package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/broker/client/clienttest"
	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/tests/fixture"
)

var cli fixture.CLI

func TestMain(m *testing.M) { fixture.MainWithCLI(m, "bounded-query", &cli.Bin) }

// errLine is every failure's line.
const errLine = client.ErrorLine + "\n"

func TestCLIAgainstBroker(t *testing.T) {
	sock := fixture.ServeEchoBroker(t, broker.QueryKind{}, "public")
	env := []string{proto.QuerySocketEnv + "=" + sock}
	got := cli.Run(t, env, strings.NewReader(`{"b": 2, "a": "x"}`), "--schema", `{"type":"object","fields":{"a":{"type":"enum","values":["x","y"]},"b":{"type":"integer","minimum":0,"maximum":3}}}`, "--repo", "o/r")
	assert.Equal(t, `{"status":"ok","result":{"a":"x","b":2}}`+"\n", got)
	// Failures from the broker are the same bytes as local ones.
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader("true"), "--repo", "o/unknown", "--schema", `{"type":"boolean"}`))
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader("maybe"), "--repo", "o/r", "--schema", `{"type":"boolean"}`))
	assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader("true"), "--repo", "o/r", "--schema", `{"type":"string"}`))
}

func TestCLIRejectsLocally(t *testing.T) {
	// A socket that records connections, not a missing one: a request that
	// got past the local checks would print the error line either way.
	sock, contacted := fixture.RecordingSocket(t)
	env := []string{proto.QuerySocketEnv + "=" + sock}
	b := `{"type":"boolean"}`
	cases := clienttest.RefusedArgs(b)
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader("x"), args...))
		})
	}
	t.Run("empty stdin", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(""), "--repo", "o/r", "--schema", b))
	})
	t.Run("script too large", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, env, strings.NewReader(strings.Repeat("#", 65537)), "--repo", "o/r", "--schema", b))
	})
	t.Run("no socket env", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, nil, strings.NewReader("x"), "--repo", "o/r", "--schema", b))
	})
	t.Run("endpoint env", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, append(env, "AWF_BOUNDED_QUERY_ENDPOINT=http://host.docker.internal:1/query"), strings.NewReader("x"), "--repo", "o/r", "--schema", b))
	})
	t.Run("tty stdin", func(t *testing.T) {
		assert.Equal(t, errLine, cli.Run(t, env, fixture.OpenPTY(t), "--repo", "o/r", "--schema", b))
	})
	assert.Empty(t, contacted, "a locally rejected request contacted the broker")
}

func TestCLIUnexpectedResponses(t *testing.T) {
	resp := fixture.HTTPResponse
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
			sock := fixture.AnsweringSocket(t, r)
			got := cli.Run(t, []string{proto.QuerySocketEnv + "=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`)
			assert.Equal(t, errLine, got)
		})
	}
	t.Run("broker down", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "gone.sock")
		ln, err := net.Listen("unix", sock)
		require.NoError(t, err)
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		got := cli.Run(t, []string{proto.QuerySocketEnv + "=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`)
		assert.Equal(t, errLine, got)
	})
	t.Run("passes a canonical ok", func(t *testing.T) {
		sock := fixture.AnsweringSocket(t, resp("200 OK", `{"status":"ok","result":[1,"a"]}`))
		got := cli.Run(t, []string{proto.QuerySocketEnv + "=" + sock}, strings.NewReader("x"), "--repo", "o/r", "--schema", `{"type":"boolean"}`)
		assert.Equal(t, `{"status":"ok","result":[1,"a"]}`+"\n", got)
	})
}

func TestCLIIsStatic(t *testing.T) { fixture.RequireStatic(t, cli.Bin) }
