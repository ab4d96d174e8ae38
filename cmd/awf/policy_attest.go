package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/awf-project/awf/policy"
)

// attestTimeout bounds the whole attestation: each thread is stopped only
// for the time it takes to read its filter.
const attestTimeout = 30 * time.Second

// policyAttest implements "awf policy attest PID [FILE]".
func policyAttest(ctx context.Context, e env, pa policyArgs) int {
	if len(pa.files) < 1 || len(pa.files) > 2 {
		fmt.Fprintf(e.stderr, "awf policy attest: want PID and at most one FILE\n%s", policyUsage)
		return 2
	}
	pid, err := strconv.Atoi(pa.files[0])
	if err != nil || pid <= 0 {
		fmt.Fprintf(e.stderr, "awf policy attest: PID %q is not a process id\n", pa.files[0])
		return 2
	}
	file := "@default"
	if len(pa.files) == 2 {
		file = pa.files[1]
	}
	p, ok := loadPolicy(e, file)
	if !ok {
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, attestTimeout)
	defer cancel()
	at, err := policy.Attest(ctx, pid, p, pa.arch)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf policy attest: %v\n", err)
		return 2
	}
	if pa.json {
		out, err := indentedJSON(at)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf policy attest: %v\n", err)
			return 2
		}
		_, _ = e.stdout.Write(out)
	} else {
		fmt.Fprint(e.stdout, at.Verdict)
	}
	if !at.Match {
		return 1
	}
	return 0
}
