package direct_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/isolatetest"
)

// BenchmarkEnclaveBackend is the backend's share of a bounded agent's
// start-to-result overhead on direct, without model time, broken down
// (make bench measures the broker's whole path: broker/host
// BenchmarkEnclaveOverhead). Per op, the enclave network, the loop in
// a fresh enclave answering after two model requests to a local provider
// that answers at once, the read-back, the teardown of both; minus the
// time the provider spent answering. A bounded query (the trivial script)
// runs interleaved in the same op, for the side-by-side medians (ms).
//
// cold builds the network and prepares the sandbox inside the invocation,
// as the broker does without a warm pool. prepared builds the network and
// prepares the sandbox (PrepareEnclave, without the invocation's files)
// before the invocation starts, as the broker's warm pool does, and
// reports that work as ahead-ms, outside the overhead: the loop has
// started there and waits for its start; the invocation writes its files,
// hands over the start, runs and tears down.
//
// The breakdown: network-ms (building, in cold, and removing the enclave
// network), sandbox-start-ms (prepare, in cold, to the loop's start being
// handed over), loop-run-ms (from the start to the loop's reaped exit,
// model-ms of it the provider's answers) and
// sandbox-teardown-ms (reading the result and transcript back, destroying
// the sandbox); each is its own median, so they need not sum to
// overhead-ms exactly.
func BenchmarkEnclaveBackend(b *testing.B) {
	for _, prepared := range []bool{false, true} {
		name := "cold"
		if prepared {
			name = "prepared"
		}
		b.Run(name, func(b *testing.B) { benchEnclave(b, prepared) })
	}
}

func benchEnclave(b *testing.B, prepared bool) {
	ctx := context.Background()
	f := isolatetest.NewEnclaveFixture(ctx, b)
	runID := newRunID()
	rt, err := direct.Open(isolate.HostConfig{RunID: runID, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	repo := seedRepo(b)
	e := newEnv(b)
	tpl := e.template(b, repo)
	var agent, overhead, run, model, start, teardown, network, ahead, query []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		n, err := enclave.New(ctx, enclave.Options{RunID: runID, Name: fmt.Sprint(i)})
		if err != nil {
			b.Fatal(err)
		}
		tn := time.Since(t0)
		p := isolatetest.ServeLoopProvider(n)
		runner := rt.RunEnclave
		var prep time.Duration // prepared: PrepareEnclave's time, ahead
		if prepared {
			runner = func(ctx context.Context, t isolate.Template, l enclave.Layout, job isolate.Job) (isolate.Outcome, []byte) {
				files := l.Files
				l.Files = nil
				tp := time.Now()
				pe, err := rt.PrepareEnclave(ctx, t, l, job.Argv)
				if err != nil {
					b.Fatal(err)
				}
				prep = time.Since(tp)
				return pe.Run(ctx, files, job)
			}
		}
		tr := time.Now()
		o, _ := f.Run(ctx, b, runID, n, runner)
		call := time.Since(tr) - prep // the sandbox's share of the invocation
		p.Close()
		tc := time.Now()
		if err := n.Close(); err != nil {
			b.Fatal(err)
		}
		net := time.Since(tc)
		var before time.Duration // work done ahead of the invocation
		if prepared {
			before = tn + prep
		} else {
			net += tn
		}
		network = append(network, net)
		d := time.Since(t0) - before
		if o.Kind != isolate.KindOK {
			b.Fatalf("enclave: %s: %s %s", o.Kind, o.Detail, o.Stderr)
		}
		agent = append(agent, d)
		overhead = append(overhead, d-p.Model())
		run = append(run, o.Timings.Run)
		model = append(model, p.Model())
		start = append(start, o.Timings.Start)
		teardown = append(teardown, call-o.Timings.Start-o.Timings.Run)
		ahead = append(ahead, before)
		_, q := isolatetest.TimedRun(ctx, b, "query", e.rt, tpl, isolate.Job{InvocationID: "bench", Script: []byte(benchScript)})
		query = append(query, q)
	}
	report(b, "agent-ms", agent)
	report(b, "overhead-ms", overhead)
	report(b, "loop-run-ms", run)
	report(b, "model-ms", model)
	report(b, "sandbox-start-ms", start)
	report(b, "sandbox-teardown-ms", teardown)
	report(b, "network-ms", network)
	if prepared {
		report(b, "ahead-ms", ahead)
	}
	report(b, "query-ms", query)
}
