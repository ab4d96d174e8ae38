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

	"github.com/awf-project/awf/broker/client"
	"github.com/awf-project/awf/proto"
)

func main() { client.Main(client.ErrorLine, run) }

func run(argv []string) string {
	a, err := client.ParseArgs(argv)
	if err != nil || os.Getenv("AWF_BOUNDED_QUERY_ENDPOINT") != "" || os.Getenv("AWF_BOUNDED_QUERY_CAPABILITY") != "" {
		return client.ErrorLine
	}
	resp, err := client.Send(os.Getenv(proto.QuerySocketEnv), os.Stdin,
		client.Job{Route: "/query", Headers: client.QueryHeaders(a), MaxBody: client.MaxBodyBytes})
	if err != nil {
		return client.ErrorLine
	}
	return client.Canonical(resp)
}
