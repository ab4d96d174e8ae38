package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const probeErr = `{"result":"ERROR"}`

// newProbeBroker is a probe broker over the fake runtime, whose job output
// is the script itself (so a test's script is its /probe/out).
func newProbeBroker(t testing.TB, maxInv int) *testBroker {
	t.Helper()
	dir := t.TempDir()
	a := testAudit(t, dir, "sealed-probe.jsonl")
	clock := &fakeClock{}
	rt := &fakeRuntime{clock: clock, cost: 40 * time.Millisecond, outcome: func(s isolate.Spec) isolate.Outcome {
		return isolate.Outcome{Kind: isolate.KindOK, Output: s.Job.Script}
	}}
	b, err := New(Options{Kind: ProbeKind{}, Runtime: rt, Template: testTemplate(),
		Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: proto.SensitivitySealed}}, MaxInvocations: maxInv,
		Timeout: 30 * time.Second, Clock: clock, Audit: a})
	require.NoError(t, err)
	return &testBroker{b: b, rt: rt, clock: clock, dir: dir}
}

func probeReq(repo string, outcomes []string, script string) *Request {
	h := []Header{{"X-AWF-Probe-Version", "1"}, {"X-AWF-Repo", repo}}
	for i, o := range outcomes {
		h = append(h, Header{fmt.Sprintf("X-AWF-Outcome-%d", i+1), o})
	}
	return &Request{Method: "POST", Target: "/probe", Headers: h, Body: []byte(script)}
}

var yesNo = []string{"YES", "NO", "UNKNOWN"}

// TestProbeFraming: every request the framing, repository or outcome rules
// refuse answers the one error body and launches nothing; valid ones run.
func TestProbeFraming(t *testing.T) {
	ok := `{"result":"YES"}`
	long := strings.Repeat("é", 32) // 64 bytes
	cases := []struct {
		name string
		req  *Request
		want string
	}{
		{"valid", probeReq("o/r", yesNo, ok), `{"result":"YES"}`},
		{"valid upper-case repo", probeReq("O/R", yesNo, ok), `{"result":"YES"}`},
		{"utf-8 outcomes of 64 bytes", probeReq("o/r", []string{long, "b", "c"}, `{"result":"`+long+`"}`), `{"result":"` + long + `"}`},
		{"disallowed repo", probeReq("o/other", yesNo, ok), probeErr},
		{"repo with traversal", probeReq("o/..", yesNo, ok), probeErr},
		{"repo as URL", probeReq("https://github.com/o/r", yesNo, ok), probeErr},
		{"two outcomes", probeReq("o/r", yesNo[:2], ok), probeErr},
		{"four outcomes", probeReq("o/r", append(yesNo, "MAYBE"), ok), probeErr},
		{"duplicate outcome", probeReq("o/r", []string{"YES", "NO", "YES"}, ok), probeErr},
		{"ERROR outcome", probeReq("o/r", []string{"YES", "NO", "ERROR"}, ok), probeErr},
		{"empty outcome", probeReq("o/r", []string{"YES", "NO", ""}, ok), probeErr},
		{"65-byte outcome", probeReq("o/r", []string{long + "x", "NO", "Z"}, ok), probeErr},
		{"control in outcome", probeReq("o/r", []string{"YES", "N\x01O", "Z"}, ok), probeErr},
		{"C1 control in outcome", probeReq("o/r", []string{"YES", "N\u0085O", "Z"}, ok), probeErr},
		{"invalid UTF-8 outcome", probeReq("o/r", []string{"YES", "N\xffO", "Z"}, ok), probeErr},
		{"empty script", probeReq("o/r", yesNo, ""), probeErr},
		{"invalid UTF-8 script", probeReq("o/r", yesNo, "\xff"), probeErr},
		{"wrong version", func() *Request { r := probeReq("o/r", yesNo, ok); r.Headers[0].Value = "2"; return r }(), probeErr},
		{"no version", func() *Request { r := probeReq("o/r", yesNo, ok); r.Headers = r.Headers[1:]; return r }(), probeErr},
		{"caller schema header", func() *Request {
			r := probeReq("o/r", yesNo, ok)
			r.Headers = append(r.Headers, Header{"X-AWF-Schema-B64", "e30"})
			return r
		}(), probeErr},
		{"launch control header", func() *Request {
			r := probeReq("o/r", yesNo, ok)
			r.Headers = append(r.Headers, Header{"X-AWF-Runtime", "direct"})
			return r
		}(), probeErr},
		{"repeated outcome header", func() *Request {
			r := probeReq("o/r", yesNo, ok)
			r.Headers = append(r.Headers, Header{"x-awf-outcome-3", "MAYBE"})
			return r
		}(), probeErr},
		{"body over cap", &Request{Method: "POST", Target: "/probe", BodyErr: errBodyTooLarge}, probeErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := newProbeBroker(t, 32)
			got := tb.b.Handle(context.Background(), c.req)
			assert.Equal(t, c.want, string(got))
			if c.want == probeErr {
				assert.Equal(t, 0, tb.rt.runs(), "a refused request must launch nothing")
			} else {
				assert.Equal(t, 1, tb.rt.runs())
			}
		})
	}
}

// TestProbeResult: only {"result":<declared outcome>} passes, re-serialised
// canonically; every other file, a script-written ERROR included, is the
// error body.
func TestProbeResult(t *testing.T) {
	cases := []struct{ out, want string }{
		{`{"result":"YES"}`, `{"result":"YES"}`},
		{` {"result" : "NO"}` + "\n", `{"result":"NO"}`},
		{`{"result":"\u0055NKNOWN"}`, `{"result":"UNKNOWN"}`},
		{`{"result":"ERROR"}`, probeErr},
		{`{"result":"MAYBE"}`, probeErr},
		{`{"result":"yes"}`, probeErr},
		{`{"result":"YES","result":"NO"}`, probeErr},
		{`{"result":"YES","extra":1}`, probeErr},
		{`{"result":"YES"} x`, probeErr},
		{`{"result":"YES"}{}`, probeErr},
		{`{}`, probeErr},
		{`"YES"`, probeErr},
		{`["YES"]`, probeErr},
		{`{"result":true}`, probeErr},
		{`{"result":null}`, probeErr},
		{`{"result":"YES"`, probeErr},
		{"{\"result\":\"YES\xff\"}", probeErr},
		{"\xef\xbb\xbf{\"result\":\"YES\"}", probeErr},
		{`{"result":"YES"}` + strings.Repeat(" ", proto.MaxProbeResultBytes), probeErr},
		{``, probeErr},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%.40q", c.out), func(t *testing.T) {
			tb := newProbeBroker(t, 4)
			got := tb.b.Handle(context.Background(), probeReq("o/r", yesNo, c.out))
			assert.Equal(t, c.want, string(got))
		})
	}
}

// TestProbeFailuresAreOneBody: every sandbox outcome but a conforming ok is
// the same bytes.
func TestProbeFailuresAreOneBody(t *testing.T) {
	for _, k := range []isolate.Kind{isolate.KindTimeout, isolate.KindOOM, isolate.KindPidsLimit, isolate.KindFileSizeLimit,
		isolate.KindSeccompKill, isolate.KindNonzeroExit, isolate.KindOutputMissing, isolate.KindOutputTooLarge,
		isolate.KindOutputInvalid, isolate.KindLaunchFailed, isolate.KindCleanupFailed} {
		t.Run(string(k), func(t *testing.T) {
			tb := newProbeBroker(t, 4)
			tb.rt.outcome = func(isolate.Spec) isolate.Outcome {
				return isolate.Outcome{Kind: k, Output: []byte(`{"result":"YES"}`), ExitCode: 3, Detail: "secret detail"}
			}
			assert.Equal(t, probeErr, string(tb.b.Handle(context.Background(), probeReq("o/r", yesNo, "x"))))
			assert.Contains(t, tb.probeAudit(t), `"reason"`)
		})
	}
}

// TestProbeFailuresOutsideTheSandbox: the seed's failures that are not a
// sandbox outcome (an internal exception, cancellation while running or
// queued, a broker shutting down) are the same bytes as every other.
func TestProbeFailuresOutsideTheSandbox(t *testing.T) {
	ok := `{"result":"YES"}`
	cases := []struct {
		name string
		run  func(t *testing.T, tb *testBroker) []byte
	}{
		{"internal exception", func(t *testing.T, tb *testBroker) []byte {
			tb.rt.outcome = func(isolate.Spec) isolate.Outcome { panic("internal failure") }
			body := tb.b.Handle(context.Background(), probeReq("o/r", yesNo, ok))
			assert.Contains(t, tb.probeAudit(t), `"reason":"unexpected-error"`, "the reason is only in the protected audit log")
			return body
		}},
		{"cancelled while running", func(t *testing.T, tb *testBroker) []byte {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tb.rt.outcome = func(s isolate.Spec) isolate.Outcome {
				cancel()
				return isolate.Outcome{Kind: isolate.KindOK, Output: s.Job.Script}
			}
			return tb.b.Handle(ctx, probeReq("o/r", yesNo, ok))
		}},
		{"cancelled while queued", func(t *testing.T, tb *testBroker) []byte {
			tb.b.lane <- struct{}{} // another job holds the lane
			defer func() { <-tb.b.lane }()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return tb.b.Handle(ctx, probeReq("o/r", yesNo, ok))
		}},
		{"broker shutting down", func(t *testing.T, tb *testBroker) []byte {
			tb.b.Freeze()
			return tb.b.Handle(context.Background(), probeReq("o/r", yesNo, ok))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := newProbeBroker(t, 4)
			assert.Equal(t, probeErr, string(c.run(t, tb)))
		})
	}
}

func (tb *testBroker) probeAudit(t *testing.T) string {
	return auditText(t, tb.dir, "sealed-probe.jsonl")
}

// TestProbeInvocationBudget: the count is the only budget; once spent, a
// valid request is refused without a launch, and every request counts.
func TestProbeInvocationBudget(t *testing.T) {
	tb := newProbeBroker(t, 3)
	ctx := context.Background()
	assert.Equal(t, `{"result":"NO"}`, string(tb.b.Handle(ctx, probeReq("o/r", yesNo, `{"result":"NO"}`))))
	assert.Equal(t, probeErr, string(tb.b.Handle(ctx, probeReq("o/x", yesNo, `{"result":"NO"}`))))
	assert.Equal(t, `{"result":"YES"}`, string(tb.b.Handle(ctx, probeReq("o/r", yesNo, `{"result":"YES"}`))))
	assert.Equal(t, probeErr, string(tb.b.Handle(ctx, probeReq("o/r", yesNo, `{"result":"YES"}`))))
	assert.Equal(t, 2, tb.rt.runs())
	assert.Contains(t, tb.probeAudit(t), ReasonCountExhausted)
}

// TestProbeTimingBuckets: a probe answers on the query's buckets.
func TestProbeTimingBuckets(t *testing.T) {
	tb := newProbeBroker(t, 4)
	tb.rt.cost = 1500 * time.Millisecond
	tb.b.Handle(context.Background(), probeReq("o/r", yesNo, `{"result":"YES"}`))
	assert.Equal(t, 10*time.Second, tb.clock.Now(), "1.5 s of work answers at the 10 s bucket")
}

// TestSharedLane: brokers that share a lane never run two sandboxes at once.
func TestSharedLane(t *testing.T) {
	lane := make(chan struct{}, 1)
	var mu sync.Mutex
	running, most := 0, 0
	slow := func(s isolate.Spec) isolate.Outcome {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return isolate.Outcome{Kind: isolate.KindOK, Output: s.Job.Script}
	}
	mk := func(k JobKind, sens string) *Broker {
		a, err := OpenAudit(filepath.Join(t.TempDir(), "audit"), "a.jsonl")
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
		b, err := New(Options{Kind: k, Runtime: &fakeRuntime{outcome: slow}, Template: testTemplate(),
			Seeds: []Seed{{Repo: "o/r", Dir: "/s", Sensitivity: sens}}, MaxInvocations: 32, Timeout: time.Second,
			Clock: &fakeClock{}, Audit: a, Lane: lane})
		require.NoError(t, err)
		return b
	}
	q, p := mk(QueryKind{}, "public"), mk(ProbeKind{}, proto.SensitivitySealed)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); q.Handle(context.Background(), queryReq("o/r", boolS, "true")) }()
		go func() {
			defer wg.Done()
			p.Handle(context.Background(), probeReq("o/r", yesNo, `{"result":"YES"}`))
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, most)
	_, err := New(Options{Kind: ProbeKind{}, Runtime: &fakeRuntime{}, MaxInvocations: 1, Timeout: time.Second, Lane: make(chan struct{}, 2)})
	assert.Error(t, err)
}

// referenceProbeRequest is a request byte for byte as the reference's
// sealed-probe wrapper sends it through curl.
func referenceProbeRequest(repo string, outcomes []string, body string) string {
	return "POST /probe HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n" +
		"Content-Type: application/octet-stream\r\n" +
		"X-AWF-Probe-Version: 1\r\nX-AWF-Repo: " + repo + "\r\n" +
		"X-AWF-Outcome-1: " + outcomes[0] + "\r\nX-AWF-Outcome-2: " + outcomes[1] + "\r\nX-AWF-Outcome-3: " + outcomes[2] + "\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n", len(body)) + "\r\n" + body
}

// TestProbeServerWire: over the socket, the reference client's request gets
// its outcome, and the query route, wrong routes and malformed heads get the
// probe's own error body, never the query envelope.
func TestProbeServerWire(t *testing.T) {
	tb := newProbeBroker(t, 32)
	tb.b.o.Clock = NewMonotonicClock()
	tb.rt.clock = nil
	sock := filepath.Join(t.TempDir(), "p.sock")
	ln, err := ListenUnix(sock, os.Getuid(), os.Getgid())
	require.NoError(t, err)
	srv := NewServer(tb.b, tb.b.o.Audit)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		assert.NoError(t, <-done)
	})
	ts := &testServer{testBroker: tb, srv: srv, sock: sock}
	assert.Equal(t, okResponse(`{"result":"UNKNOWN"}`), ts.raw(t, referenceProbeRequest("o/r", yesNo, `{"result":"UNKNOWN"}`)))
	bad := okResponse(probeErr)
	for _, r := range []string{
		strings.Replace(referenceProbeRequest("o/r", yesNo, `{"result":"YES"}`), "/probe", "/query", 1),
		"GET /probe HTTP/1.1\r\n\r\n",
		"POST /probe HTTP/1.1\n\n",
		referenceProbeRequest("o/r", []string{"YES", "NO", "ERROR"}, `{"result":"YES"}`),
	} {
		assert.Equal(t, bad, ts.raw(t, r))
	}
	assert.Equal(t, 1, tb.rt.runs())
}

// FuzzProbeFrame drives the head parser, the body framing and the probe
// framing with arbitrary bytes: one of the four bodies always comes back,
// and nothing runs unless the request was valid.
func FuzzProbeFrame(f *testing.F) {
	f.Add([]byte(referenceProbeRequest("o/r", yesNo, `{"result":"YES"}`)))
	f.Add([]byte(referenceProbeRequest("o/r", []string{"A", "A", "B"}, `{"result":"A"}`)))
	f.Add([]byte(referenceProbeRequest("o/r", []string{"é", "ü", "ERROR"}, `x`)))
	f.Add([]byte("POST /probe HTTP/1.1\r\nX-AWF-Probe-Version: 1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, ok := readRaw(raw, ProbeKind{}.MaxBody())
		if !ok {
			return
		}
		tb := newProbeBroker(t, 4)
		out := string(tb.b.Handle(context.Background(), req))
		var outcomes []string
		for _, name := range []string{proto.HeaderOutcome1, proto.HeaderOutcome2, proto.HeaderOutcome3} {
			v, _, _ := req.header(name)
			outcomes = append(outcomes, v)
		}
		switch {
		case out == probeErr:
		case tb.rt.runs() == 1 && proto.ValidateOutcomes(outcomes) == nil && contains(proto.ProbeResultBodies(outcomes), out):
		default:
			t.Fatalf("body %q for outcomes %q after %d runs", out, outcomes, tb.rt.runs())
		}
	})
}

// FuzzProbeResult: for any /probe/out bytes the check either fails or
// returns one of the three outcome bodies, byte-identical to its canonical
// form; ERROR never passes.
func FuzzProbeResult(f *testing.F) {
	for _, s := range []string{`{"result":"YES"}`, `{"result":"ERROR"}`, `{"result":"YES","result":"NO"}`,
		`{"result":"NO"} `, "{\"result\":\"\\u0059ES\"}", `{"result":"UNKNOWN"}x`, "\xff"} {
		f.Add([]byte(s))
	}
	r, err := proto.ValidateProbeRequest("o/r", yesNo, []byte("x"))
	require.NoError(f, err)
	bodies := proto.ProbeResultBodies(yesNo)[:3]
	f.Fuzz(func(t *testing.T, out []byte) {
		c, err := r.CheckResult(out)
		if err != nil {
			return
		}
		if !contains(bodies, string(c)) {
			t.Fatalf("result %q passed as %q", out, c)
		}
	})
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func TestProbeSkill(t *testing.T) {
	s := ProbeSkill([]string{"lpcox/foo", "lpcox/bar"}, 30, 32)
	for _, want := range []string{"name: sealed_probe", "- `lpcox/foo`", "- `lpcox/bar`", "/probe/repo", "/probe/out",
		"--outcome", "exactly three", "never `ERROR`", "At most 32 probes", "30 s time limit", "two bits"} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "/query")
}
