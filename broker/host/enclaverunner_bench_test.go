package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/awf-project/awf/broker"
	"github.com/awf-project/awf/broker/agentloop"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/isolate/direct"
	"github.com/awf-project/awf/isolate/enclave"
	"github.com/awf-project/awf/isolate/isolatetest"
	"github.com/awf-project/awf/policy"
	"github.com/awf-project/awf/rootfs"
)

// benchProvider stands in for the API proxy on every handed-over link:
// on each, isolatetest's scripted OpenAI-shaped provider, which answers
// the invocation's first request with a list_files call and its second
// with finish(true), at once. model is the time the links spent answering.
type benchProvider struct {
	mu    sync.Mutex
	model time.Duration
	links map[string]*isolatetest.LoopProvider
	next  int
}

func (p *benchProvider) Listen(_ context.Context, l *net.TCPListener) (string, error) {
	lp := isolatetest.ServeLoopProviderOn(l)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	id := fmt.Sprint(p.next)
	if p.links == nil {
		p.links = map[string]*isolatetest.LoopProvider{}
	}
	p.links[id] = lp
	return id, nil
}

func (p *benchProvider) Unlisten(_ context.Context, id string) error {
	p.mu.Lock()
	lp := p.links[id]
	delete(p.links, id)
	p.mu.Unlock()
	if lp == nil {
		return fmt.Errorf("no listener %s", id)
	}
	lp.Close()
	p.mu.Lock()
	p.model += lp.Model()
	p.mu.Unlock()
	return nil
}

// takeModel returns the model time since the last call.
func (p *benchProvider) takeModel() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.model
	p.model = 0
	return m
}

// BenchmarkEnclaveOverhead is a bounded agent's start-to-result overhead
// on direct without model time, on the broker's own path
// (enclaveRuntime.RunEnclave as the bounded-agent broker calls it: the
// loop's minimal root, the loop's policy, the enclave layout, the proxy
// hand-off and take-back, the teardown), with the real static loop making
// two model requests to a provider on the link that answers at once;
// minus the time the provider spent answering. A bounded query (a
// trivial script, cold: Prepare, Exec, Destroy) runs in the same op.
//
// cold: no warm pool, the network and the sandbox are made inside the
// invocation. prepared: the broker's warm pool of one enclave, refilled
// after each invocation as the broker refills after the response, outside
// the invocation (reported as refill-ms); the refill starts the loop,
// which waits for its start (agentloop.AwaitStart). Medians, ms, with a
// breakdown: start-ms (from the call to the loop's start being handed
// over: in cold the network, the sandbox's prepare and the loop's exec,
// in prepared the files written and the handover), loop-run-ms (from the
// start to the loop's reaped exit, model-ms of it the provider's: the
// time its handler took, from the request's headers to the answer
// written, so that only the fake provider's own work is taken off) and
// teardown-ms (the rest: the network when cold, the proxy hand-off and
// take-back, the read-back, the sandbox's and the network's teardown);
// each its own median.
func BenchmarkEnclaveOverhead(b *testing.B) {
	ctx := context.Background()
	work := b.TempDir()
	loop := filepath.Join(work, "loop")
	build := exec.CommandContext(ctx, "go", "build", "-o", loop, "github.com/awf-project/awf/cmd/agent-loop")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the loop: %v: %s", err, out)
	}
	qroot := filepath.Join(work, "query-root")
	if _, err := rootfs.Build(ctx, rootfs.Options{Out: qroot}); err != nil {
		b.Fatalf("build the query root: %v", err)
	}
	for _, prepared := range []bool{false, true} {
		name := "cold"
		if prepared {
			name = "prepared"
		}
		b.Run(name, func(b *testing.B) { benchBrokerEnclave(b, loop, qroot, prepared) })
	}
}

func benchBrokerEnclave(b *testing.B, loop, qroot string, prepared bool) {
	ctx := context.Background()
	work := b.TempDir()
	runID := testRunID()
	rt, err := direct.Open(isolate.HostConfig{RunID: runID, StateDir: filepath.Join(work, "state")})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := rt.Sweep(ctx); err != nil {
			b.Error(err)
		}
		rt.Close()
		if left := enclave.Resources(runID); len(left) > 0 {
			b.Errorf("enclave networks left: %v", left)
		}
	}()
	root := filepath.Join(work, "root")
	if err := buildEnclaveRoot(ctx, root); err != nil {
		b.Fatal(err)
	}
	loopPol, err := policy.AgentLoop()
	if err != nil {
		b.Fatal(err)
	}
	queryPol, err := policy.Default()
	if err != nil {
		b.Fatal(err)
	}
	seed := filepath.Join(work, "seed")
	if err := os.MkdirAll(seed, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	prov := &benchProvider{}
	r := &enclaveRuntime{Runtime: rt, runID: runID, proxy: prov, newNetwork: enclave.New,
		sandbox: backendSandbox(rt, root, loopPol), prepare: backendPrepare(rt, root, loopPol)}
	lim := isolate.DefaultLimits()
	lim.Wall = 30 * time.Second
	shape := broker.Enclave{SeedDir: seed, LoopBinary: loop, Argv: []string{broker.EnclaveLoopPath},
		Env: []string{"PATH=/enclave/bin", "LANG=C.UTF-8", "HOME=/tmp"}, UID: isolate.SandboxUID, GID: isolate.SandboxGID,
		NoNewPrivileges: true, Limits: lim, Proxy: netipProxy(), ResultBytes: 8192, TranscriptBytes: broker.MaxTranscriptBytes}
	tpl := isolate.Template{RunID: runID, RootFS: root, Repo: seed, Limits: lim, Policy: queryPol}
	var wp broker.WarmPool
	if prepared {
		if wp, err = r.EnclavePool(1, []isolate.Template{tpl}, func(isolate.Template) broker.Enclave { return shape }); err != nil {
			b.Fatal(err)
		}
		defer func() {
			if err := wp.Close(ctx); err != nil {
				b.Error(err)
			}
		}()
		if _, err := wp.Fill(ctx); err != nil {
			b.Fatal(err)
		}
	}
	qtpl := isolate.Template{RunID: runID, RootFS: qroot, Limits: isolate.DefaultLimits(), Policy: queryPol}
	var agent, overhead, model, start, run, rest, refill, query []time.Duration
	for i := 0; b.Loop(); i++ {
		cfg, err := json.Marshal(agentloop.Config{Profile: agentloop.ProfileOpenAI, Model: "m", Endpoint: "http://" + shape.Proxy.String(),
			Capability: "awf-cap-bench", MaxModelRequests: 4, MaxModelTokens: 1000, MaxOutputBytes: 1024,
			DeadlineUnixMilli: time.Now().Add(20 * time.Second).UnixMilli(), AnthropicVersion: broker.AnthropicVersion})
		if err != nil {
			b.Fatal(err)
		}
		e := shape
		e.InvocationID = fmt.Sprintf("%024x", i+1)
		e.Files = []broker.EnclaveFile{
			{Path: broker.EnclaveTaskPath, Content: []byte("Is there a README?")},
			{Path: broker.EnclaveSchemaPath, Content: []byte(`{"type":"boolean"}`)},
			{Path: broker.EnclaveLoopConfigPath, Content: cfg},
		}
		prov.takeModel()
		t0 := time.Now()
		o := r.RunEnclave(ctx, tpl, e)
		d := time.Since(t0)
		m := prov.takeModel()
		if o.Kind != isolate.KindOK || string(o.Output) != "true" {
			b.Fatalf("enclave: %s: %s %s (output %q)", o.Kind, o.Detail, o.Stderr, o.Output)
		}
		agent = append(agent, d)
		overhead = append(overhead, d-m)
		model = append(model, m)
		start = append(start, o.Timings.Start)
		run = append(run, o.Timings.Run)
		rest = append(rest, d-o.Timings.Start-o.Timings.Run)
		if prepared {
			// The broker refills after the response, on the lane the job
			// held; here, after the measured invocation.
			tr := time.Now()
			if _, err := wp.Fill(ctx); err != nil {
				b.Fatal(err)
			}
			refill = append(refill, time.Since(tr))
		}
		_, q := isolatetest.TimedRun(ctx, b, "query", rt, qtpl, isolate.Job{InvocationID: "bench", Script: []byte("open('/query/out', 'w').write('{\"n\": 1}')\n")})
		query = append(query, q)
	}
	if prepared {
		if st := wp.Stats(); st.Cold != 0 || st.Warm != len(agent) {
			b.Fatalf("the pool served %d of %d invocations (cold %d)", st.Warm, len(agent), st.Cold)
		}
	}
	isolatetest.ReportMedian(b, "agent-ms", agent)
	isolatetest.ReportMedian(b, "overhead-ms", overhead)
	isolatetest.ReportMedian(b, "model-ms", model)
	isolatetest.ReportMedian(b, "start-ms", start)
	isolatetest.ReportMedian(b, "loop-run-ms", run)
	isolatetest.ReportMedian(b, "teardown-ms", rest)
	if prepared {
		isolatetest.ReportMedian(b, "refill-ms", refill)
	}
	isolatetest.ReportMedian(b, "query-ms", query)
	// The host's load as the run ends (1-minute average): the medians
	// grow with it (docs/PERFORMANCE.md).
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		var load1 float64
		if _, err := fmt.Sscan(string(la), &load1); err == nil {
			b.ReportMetric(load1, "load1")
		}
	}
}
