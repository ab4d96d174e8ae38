package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/awf-project/awf/broker/host"
	"github.com/awf-project/awf/broker/timingcheck"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/runtimes"
	"github.com/awf-project/awf/policy"
)

// timingVerify is what "awf isolate verify --timing" needs from the command line.
type timingVerify struct {
	runtimes, required []string
	n                  int
	asJSON             bool
	progress           bool
	rootfs             string
	policy             *policy.Policy
	host               isolate.HostConfig
}

// timingReport is the JSON document of --timing --json: one report per runtime.
type timingReport struct {
	Version  int                   `json:"version"`
	Runtimes []timingRuntimeReport `json:"runtimes"`
}

type timingRuntimeReport struct {
	Name   string              `json:"name"`
	Status string              `json:"status"` // PASS, FAIL, BLOCKED
	Reason string              `json:"reason,omitempty"`
	Report *timingcheck.Report `json:"report,omitempty"`
}

// runTimingVerify runs the timing self-test on each runtime in turn; it
// exits 0 only when every runtime passes (a BLOCKED runtime that is not
// required is reported and tolerated).
func runTimingVerify(ctx context.Context, e env, tv timingVerify) int {
	out := timingReport{Version: 1}
	code := 0
	for _, name := range tv.runtimes {
		rr := timingRuntime(ctx, e, tv, name)
		switch {
		case rr.Status == "FAIL":
			code = 1
		case rr.Status == "BLOCKED" && slices.Contains(tv.required, name):
			code = 1
		}
		if !tv.asJSON {
			if rr.Report != nil {
				fmt.Fprint(e.stdout, rr.Report.Text())
			} else {
				fmt.Fprintf(e.stdout, "%s timing/buckets (%s): %s\n", rr.Status, name, rr.Reason)
			}
		}
		out.Runtimes = append(out.Runtimes, rr)
	}
	if tv.asJSON {
		b, err := indentedJSON(out)
		if err != nil {
			fmt.Fprintf(e.stderr, "awf isolate verify --timing: %v\n", err)
			return 2
		}
		_, _ = e.stdout.Write(b)
	}
	return code
}

func timingRuntime(ctx context.Context, e env, tv timingVerify, name string) timingRuntimeReport {
	rr := timingRuntimeReport{Name: name}
	blocked := func(format string, args ...any) timingRuntimeReport {
		rr.Status, rr.Reason = "BLOCKED", fmt.Sprintf(format, args...)
		return rr
	}
	parent := tv.host.StateDir
	if parent == "" {
		parent = os.TempDir()
	}
	state, err := os.MkdirTemp(parent, "verify-timing-"+name+"-")
	if err != nil {
		return blocked("state directory: %v", err)
	}
	defer os.RemoveAll(state)
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	h := tv.host
	h.RunID, h.StateDir = "verify-"+hex.EncodeToString(id), state
	// Sandboxes are pinned as awf run pins them, away from the client.
	split, err := host.SplitCPUs()
	if err != nil {
		return blocked("%v", err)
	}
	h.SandboxCPUs = split.Sandbox
	rt, err := runtimes.Open(name, h)
	if err != nil {
		return blocked("%v", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = rt.Sweep(sctx)
		cancel()
		_ = rt.Close()
	}()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = rt.Probe(pctx)
	cancel()
	if err != nil {
		return blocked("%v", err)
	}
	opts := timingcheck.Options{
		Runtime:  rt,
		Template: isolate.Template{RunID: h.RunID, RootFS: tv.rootfs, Limits: isolate.DefaultLimits(), Policy: tv.policy},
		N:        tv.n,
		WorkDir:  "",
	}
	if tv.progress {
		opts.Progress = func(s string) { fmt.Fprintf(e.stderr, "%-7s timing: %s\n", name, s) }
	}
	rep, err := timingcheck.Run(ctx, opts)
	if err != nil {
		rr.Status, rr.Reason = "FAIL", err.Error()
		return rr
	}
	rr.Report = rep
	rr.Status = "PASS"
	if !rep.Pass {
		rr.Status = "FAIL"
	}
	return rr
}

// timingDockerSocket resolves the Engine socket as awf run does ("" when
// DOCKER_HOST names none: only docker needs it, and its probe says so).
func timingDockerSocket(flag string) string {
	sock, _, err := host.DockerSocket(flag, os.Getenv("DOCKER_HOST"))
	if err != nil {
		return ""
	}
	return sock
}
