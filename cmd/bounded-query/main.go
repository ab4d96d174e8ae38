// Command bounded-query is the agent's CLI: it sends one Python script and
// its finite schema to the broker and prints exactly one canonical line.
//
//	bounded-query --repo OWNER/REPO --schema 'JSON' < script.py
//
// It always exits 0, never writes to stderr, and prints {"status":"error"}
// for every failure, local or remote.
package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/awf-project/awf/broker/client"
)

func main() {
	silenceStderr()
	signal.Ignore(syscall.SIGPIPE)
	line := client.ErrorLine
	func() {
		defer func() { _ = recover() }()
		line = run(os.Args[1:])
	}()
	_, _ = os.Stdout.WriteString(line + "\n")
	os.Exit(0)
}

// silenceStderr points fd 2 at /dev/null so that nothing, not even a
// runtime message, reaches the caller's stderr.
func silenceStderr() {
	if f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		_ = syscall.Dup3(int(f.Fd()), 2, 0)
		f.Close()
	}
}

func run(argv []string) string {
	a, err := client.ParseArgs(argv)
	if err != nil {
		return client.ErrorLine
	}
	sock := os.Getenv("AWF_BOUNDED_QUERY_SOCKET")
	if sock == "" || os.Getenv("AWF_BOUNDED_QUERY_ENDPOINT") != "" || os.Getenv("AWF_BOUNDED_QUERY_CAPABILITY") != "" {
		return client.ErrorLine
	}
	if client.IsTerminal(0) {
		return client.ErrorLine
	}
	body, err := client.ReadBody(os.Stdin)
	if err != nil {
		return client.ErrorLine
	}
	req := client.BuildRequest(client.QueryHeaders(a), body)
	resp, err := client.Exchange(sock, req, time.Now().Add(client.Deadline))
	if err != nil {
		return client.ErrorLine
	}
	return client.Canonical(resp)
}
