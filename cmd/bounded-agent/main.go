// Command bounded-agent is the agent's CLI for bounded agents: it sends one
// task and its finite schema to the bounded-agent broker and prints exactly
// one canonical line.
//
//	bounded-agent --repo OWNER/REPO --schema 'JSON' <<'TASK'
//	Which subsystem owns the retry policy?
//	TASK
//
// It accepts exactly --repo and --schema, once each, and the task on stdin
// (not a terminal, UTF-8, at most maxTaskBytes). There is no other option:
// it cannot name a model, provider, runtime, tool, limit or endpoint. It
// always exits 0, never writes to stderr, and prints {"status":"error"}
// for every failure, local or remote.
package main

import (
	"errors"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/proto"
)

// The framing of a bounded-agent request (broker.AgentHeaderNames; a test
// keeps the two equal).
const (
	headerAgentVersion = "x-awf-agent-version"
	agentVersion       = "1"
	// maxTaskBytes is the hard cap; AWF_BOUNDED_AGENT_MAX_TASK_BYTES, set
	// by awf from boundedAgents.maxTaskBytes, can only lower it.
	maxTaskBytes = 65536
)

// The environment awf gives the agent.
const (
	envSocket       = "AWF_BOUNDED_AGENT_SOCKET"
	envMaxTaskBytes = "AWF_BOUNDED_AGENT_MAX_TASK_BYTES"
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
	sock := os.Getenv(envSocket)
	if sock == "" {
		return client.ErrorLine
	}
	limit, err := taskLimit(os.Getenv(envMaxTaskBytes))
	if err != nil {
		return client.ErrorLine
	}
	if client.IsTerminal(0) {
		return client.ErrorLine
	}
	task, err := readTask(os.Stdin, limit)
	if err != nil {
		return client.ErrorLine
	}
	headers := [][2]string{
		{headerAgentVersion, agentVersion},
		{proto.HeaderRepo, a.Repo},
		{proto.HeaderSchema, client.EncodeSchema(a.Schema)},
	}
	resp, err := client.Exchange(sock, client.BuildRequest(headers, task), time.Now().Add(client.Deadline))
	if err != nil {
		return client.ErrorLine
	}
	return client.Canonical(resp)
}

// taskLimit is maxTaskBytes lowered by the configured value, when set.
func taskLimit(v string) (int, error) {
	if v == "" {
		return maxTaskBytes, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxTaskBytes {
		return 0, errors.New("bad task limit")
	}
	return n, nil
}

// readTask reads the task: non-empty, at most limit bytes, valid UTF-8.
func readTask(f *os.File, limit int) ([]byte, error) {
	b, err := client.ReadBody(f)
	switch {
	case err != nil:
		return nil, err
	case len(b) > limit:
		return nil, errors.New("task too large")
	case !utf8.Valid(b):
		return nil, errors.New("task is not UTF-8")
	}
	return b, nil
}
