// Command agent-loop is the fixed model loop of a bounded-agent enclave
// (package broker/agentloop). It takes no arguments and reads nothing from
// its environment: its inputs are the read-only files the broker mounts at
// the contract's paths, and its only outputs are result.json and
// transcript.jsonl under /enclave/out. It is built static (CGO_ENABLED=0)
// because it is the only program in the enclave.
//
// A backend may start it ahead of its invocation (direct does, for a
// prepared enclave and a cold one alike): it then initialises its runtime,
// waits on descriptor 3 for the start (agentloop.AwaitStart) and reads its
// inputs only after it, exactly as a loop started at the invocation does.
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
	if err := agentloop.AwaitHandedStart(); err != nil {
		os.Exit(agentloop.ExitNoStart)
	}
	os.Exit(agentloop.Main(context.Background(), agentloop.DefaultPaths()))
}
