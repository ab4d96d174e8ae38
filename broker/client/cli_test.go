package client

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fixture"
)

func TestLineOfAPanicIsTheErrorLine(t *testing.T) {
	assert.Equal(t, "ok", lineOf(ErrorLine, func([]string) string { return "ok" }, nil))
	assert.Equal(t, ErrorLine, lineOf(ErrorLine, func([]string) string { panic("boom") }, nil))
	assert.Equal(t, `{"result":"ERROR"}`, lineOf(`{"result":"ERROR"}`, func(a []string) string { return a[7] }, nil))
}

// stdinOf returns the read side of a pipe holding b, as a CLI's stdin.
func stdinOf(t *testing.T, b string) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	_, err = w.WriteString(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return r
}

// TestSendReturnsTheAnswer: a job that passes the local rules is sent, and
// Send returns the broker's body (what the CLI prints is Canonical's, or the
// probe's outcome check's, verdict on it).
func TestSendReturnsTheAnswer(t *testing.T) {
	sock := fixture.AnsweringSocket(t, fixture.HTTPResponse("200 OK", `{"status":"ok","result":1}`))
	resp, err := Send(sock, stdinOf(t, "print(1)"), Job{Route: "/probe", Headers: [][2]string{{"X-A", "1"}}, MaxBody: 8})
	require.NoError(t, err)
	assert.Equal(t, `{"status":"ok","result":1}`, string(resp))
}

// TestSendRefusesLocally: every refusal happens before the broker is
// contacted.
func TestSendRefusesLocally(t *testing.T) {
	sock, contacted := fixture.RecordingSocket(t)
	cases := map[string]struct {
		socket string
		stdin  *os.File
		job    Job
	}{
		"no socket":      {"", stdinOf(t, "x"), Job{MaxBody: 8}},
		"terminal stdin": {sock, fixture.OpenPTY(t), Job{MaxBody: 8}},
		"empty body":     {sock, stdinOf(t, ""), Job{MaxBody: 8}},
		"over the cap":   {sock, stdinOf(t, strings.Repeat("a", 9)), Job{MaxBody: 8}},
		"not UTF-8":      {sock, stdinOf(t, "a\xff"), Job{MaxBody: 8, UTF8: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Send(tc.socket, tc.stdin, tc.job)
			assert.Error(t, err)
		})
	}
	assert.Empty(t, contacted, "a refused job reached the socket")
}
