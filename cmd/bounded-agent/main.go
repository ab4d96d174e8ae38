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
	"strconv"

	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/proto"
)

// maxTaskBytes is the hard cap; AWF_BOUNDED_AGENT_MAX_TASK_BYTES, set by awf
// from boundedAgents.maxTaskBytes, can only lower it.
const maxTaskBytes = proto.MaxAgentTaskBytes

func main() { client.Main(client.ErrorLine, run) }

func run(argv []string) string {
	a, err := client.ParseArgs(argv)
	if err != nil {
		return client.ErrorLine
	}
	limit, err := taskLimit(os.Getenv(proto.AgentMaxTaskBytesEnv))
	if err != nil {
		return client.ErrorLine
	}
	headers := [][2]string{
		{proto.HeaderAgentVersion, proto.AgentProtocolVersion},
		{proto.HeaderRepo, a.Repo},
		{proto.HeaderSchema, client.EncodeSchema(a.Schema)},
	}
	resp, err := client.Send(os.Getenv(proto.AgentSocketEnv), os.Stdin, client.Job{Route: "/query", Headers: headers, MaxBody: limit, UTF8: true})
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
