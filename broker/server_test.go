package broker

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/tests/fixture/curlquery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testServer struct {
	*testBroker
	srv  *Server
	sock string
}

func startServer(t *testing.T, maxInv int) *testServer {
	t.Helper()
	tb := newTestBroker(t, maxInv, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
	tb.b.o.Clock = NewMonotonicClock()
	tb.rt.clock = nil
	tb.rt.outcome = func(s isolate.Spec) isolate.Outcome {
		return isolate.Outcome{Kind: isolate.KindOK, Output: s.Job.Script}
	}
	srv, sock, done := serveOn(t, tb.b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		assert.NoError(t, <-done)
	})
	return &testServer{testBroker: tb, srv: srv, sock: sock}
}

// serveOn serves b on a fresh socket of its own; done receives Serve's
// result once the caller has shut srv down.
func serveOn(t *testing.T, b *Broker) (srv *Server, sock string, done chan error) {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "awf-sock-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock = filepath.Join(sockDir, "broker.sock")
	ln, err := ListenUnix(sock, os.Getuid(), os.Getgid())
	require.NoError(t, err)
	srv = NewServer(b, b.o.Audit)
	done = make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return srv, sock, done
}

// curlRequest is curlquery.Request: a request exactly as the reference
// wrapper's curl invocation sends it.
func curlRequest(repo, schema, body string) string { return curlquery.Request(repo, schema, body) }

func (ts *testServer) raw(t *testing.T, req string) string {
	t.Helper()
	c, err := net.Dial("unix", ts.sock)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	resp, err := io.ReadAll(c)
	require.NoError(t, err)
	return string(resp)
}

func okResponse(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncache-control: no-store\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s", len(body), body)
}

func TestServerCurlShapedRequest(t *testing.T) {
	ts := startServer(t, 32)
	got := ts.raw(t, curlRequest("o/r", `{"type":"enum","values":["MIT","Apache-2.0"]}`, `"MIT"`))
	assert.Equal(t, okResponse(`{"status":"ok","result":"MIT"}`), got)
	assert.Equal(t, 1, ts.b.Used())
}

func TestServerCapsAndRoutes(t *testing.T) {
	ok := okResponse(`{"status":"ok","result":true}`)
	bad := okResponse(errBody)
	big := strings.Repeat("#", 65537)
	cases := []struct {
		name    string
		req     string
		want    string
		counted bool
	}{
		{"curl shape", curlRequest("o/r", boolS, "true"), ok, true},
		{"chunked", "POST /query HTTP/1.1\r\nHost: x\r\nX-AWF-Query-Version: 2\r\nX-AWF-Repo: o/r\r\nX-AWF-Schema-B64: " + base64.RawURLEncoding.EncodeToString([]byte(boolS)) + "\r\nTransfer-Encoding: chunked\r\n\r\n2\r\ntr\r\n2;x=y\r\nue\r\n0\r\n\r\n", ok, true},
		{"expect continue", strings.Replace(curlRequest("o/r", boolS, "true"), "Accept: */*\r\n", "Accept: */*\r\nExpect: 100-continue\r\n", 1), "HTTP/1.1 100 Continue\r\n\r\n" + ok, true},
		{"GET", "GET /query HTTP/1.1\r\nHost: x\r\n\r\n", bad, true},
		{"other path", strings.Replace(curlRequest("o/r", boolS, "true"), "/query", "/health", 1), bad, true},
		{"query string", strings.Replace(curlRequest("o/r", boolS, "true"), "/query", "/query?x=1", 1), bad, true},
		{"oversized body", curlRequest("o/r", boolS, big), bad, true},
		{"oversized chunked", "POST /query HTTP/1.1\r\nX-AWF-Query-Version: 2\r\nTransfer-Encoding: chunked\r\n\r\n10001\r\n" + big[:65537] + "\r\n0\r\n\r\n", bad, true},
		{"oversized head", "POST /query HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", 9000) + "\r\n\r\n", bad, true},
		{"bare LF", strings.ReplaceAll(curlRequest("o/r", boolS, "true"), "\r\n", "\n"), bad, true},
		{"both lengths", strings.Replace(curlRequest("o/r", boolS, "true"), "\r\n\r\n", "\r\nTransfer-Encoding: chunked\r\n\r\n", 1), bad, true},
		{"two lengths", strings.Replace(curlRequest("o/r", boolS, "true"), "\r\n\r\n", "\r\nContent-Length: 4\r\n\r\n", 1), bad, true},
		{"gzip coding", "POST /query HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", bad, true},
		{"folded header", strings.Replace(curlRequest("o/r", boolS, "true"), "Accept: */*\r\n", "Accept: */*\r\n x\r\n", 1), bad, true},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", bad, true},
		{"duplicate awf header", strings.Replace(curlRequest("o/r", boolS, "true"), "X-AWF-Repo: o/r\r\n", "X-AWF-Repo: o/r\r\nx-awf-repo: o/r\r\n", 1), bad, true},
		{"unknown awf header", strings.Replace(curlRequest("o/r", boolS, "true"), "Accept: */*\r\n", "X-AWF-Budget: 9\r\n", 1), bad, true},
		{"short body", strings.Replace(curlRequest("o/r", boolS, "true"), "Content-Length: 4", "Content-Length: 5", 1), bad, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, 32)
			got := ts.raw(t, tc.req)
			assert.Equal(t, tc.want, got)
			want := 0
			if tc.counted {
				want = 1
			}
			assert.Equal(t, want, ts.b.Used(), "counted")
		})
	}
}

func TestServerHeadTimeoutCanonical(t *testing.T) {
	ts := startServer(t, 32)
	c, err := net.Dial("unix", ts.sock)
	require.NoError(t, err)
	defer c.Close()
	_, _ = io.WriteString(c, "POST /query HTTP/1.1\r\n")
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, okResponse(errBody), string(resp))
	assert.Equal(t, 1, ts.b.Used(), "a head timeout is answered, so counted")
	assert.Contains(t, ts.audit(t), `"reason":"header-rejected"`)
}

func TestServerEightConcurrentClients(t *testing.T) {
	ts := startServer(t, 32)
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = ts.raw(t, curlRequest("o/r", `{"type":"integer","minimum":0,"maximum":7}`, fmt.Sprint(i)))
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		assert.Equal(t, okResponse(fmt.Sprintf(`{"status":"ok","result":%d}`, i)), r)
	}
	assert.Equal(t, 8, ts.rt.runs())
}

func TestServerConnectionLimit(t *testing.T) {
	ts := startServer(t, 32)
	var held []net.Conn
	for i := 0; i < MaxConns; i++ {
		c, err := net.Dial("unix", ts.sock)
		require.NoError(t, err)
		held = append(held, c)
	}
	// Give the server time to accept every held connection.
	require.Eventually(t, func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.conns == MaxConns
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, okResponse(errBody), ts.raw(t, curlRequest("o/r", boolS, "true")))
	assert.Equal(t, 1, ts.b.Used(), "the rejection is counted")
	for _, c := range held {
		c.Close()
	}
	assert.Contains(t, ts.audit(t), `"reason":"connection-limit"`)
}

func TestServerShutdownAnswersCanonically(t *testing.T) {
	ts := startServer(t, 32)
	c, err := net.Dial("unix", ts.sock)
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.conns == 1
	}, 5*time.Second, 5*time.Millisecond)
	ts.b.Freeze()
	_, err = io.WriteString(c, curlRequest("o/r", boolS, "true"))
	require.NoError(t, err)
	resp, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, okResponse(errBody), string(resp))
	assert.Equal(t, 0, ts.b.Used())
}

func TestSocketMode(t *testing.T) {
	ts := startServer(t, 32)
	fi, err := os.Stat(ts.sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestServerWrongRouteCountedAndAudited: a wrong route is answered,
// counted and audited; awf's own readiness probe (root, GET /ready) is
// answered but neither counted nor audited.
func TestServerWrongRouteCountedAndAudited(t *testing.T) {
	ts := startServer(t, 32)
	assert.Equal(t, okResponse(errBody), ts.raw(t, "GET /ready HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	assert.Equal(t, 0, ts.b.Used(), "the probe is not counted")
	assert.NotContains(t, ts.audit(t), `"reason":"wrong-route"`)
	assert.Equal(t, okResponse(errBody), ts.raw(t, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	assert.Equal(t, 1, ts.b.Used())
	assert.Contains(t, ts.audit(t), `"reason":"wrong-route"`)
}
