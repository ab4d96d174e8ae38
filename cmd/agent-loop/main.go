// Command agent-loop is the fixed model loop of a bounded-agent enclave
// (package broker/agentloop). It takes no arguments and reads nothing from
// its environment: its inputs are the read-only files the broker mounts at
// the contract's paths, and its only outputs are result.json and
// transcript.jsonl under /enclave/out. It is built static (CGO_ENABLED=0)
// because it is the only program in the enclave.
package main

import (
	"context"
	"os"

	"github.com/awf-project/awf/broker/agentloop"
)

func main() {
	if len(os.Args) > 1 {
		os.Exit(agentloop.ExitBadInput)
	}
	os.Exit(agentloop.Main(context.Background(), agentloop.DefaultPaths()))
}
