package broker

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/awf-project/awf/isolate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testBroker struct {
	b     *Broker
	rt    *fakeRuntime
	clock *fakeClock
	dir   string
}

// testAudit opens the audit log file under dir/audit, closed when the test
// ends.
func testAudit(t testing.TB, dir, file string) *Audit {
	t.Helper()
	a, err := OpenAudit(filepath.Join(dir, "audit"), file)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

// testTemplate is the template of every test broker: run id "r" and the
// default limits.
func testTemplate() isolate.Template {
	return isolate.Template{RunID: "r", Limits: isolate.DefaultLimits()}
}

func newTestBroker(t testing.TB, maxInv int, seeds ...Seed) *testBroker {
	t.Helper()
	dir := t.TempDir()
	a := testAudit(t, dir, "bounded-query.jsonl")
	clock := &fakeClock{}
	rt := &fakeRuntime{clock: clock, cost: 40 * time.Millisecond}
	b, err := New(Options{Kind: QueryKind{}, Runtime: rt, Template: testTemplate(),
		Seeds: seeds, MaxInvocations: maxInv, Timeout: 30 * time.Second, Clock: clock, Audit: a})
	require.NoError(t, err)
	return &testBroker{b: b, rt: rt, clock: clock, dir: dir}
}

// schemaReq is a POST /query of the kind whose version header is
// versionHeader: version, the repository and the schema as headers, body as
// its body.
func schemaReq(versionHeader, version, repo, schema, body string) *Request {
	return &Request{Method: "POST", Target: "/query", Headers: []Header{
		{versionHeader, version}, {"X-AWF-Repo", repo},
		{"X-AWF-Schema-B64", base64.RawURLEncoding.EncodeToString([]byte(schema))},
	}, Body: []byte(body)}
}

func queryReq(repo, schema, script string) *Request {
	return schemaReq("X-AWF-Query-Version", "2", repo, schema, script)
}

// auditText returns the audit log file that testAudit opened under dir.
func auditText(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "audit", file))
	require.NoError(t, err)
	return string(b)
}

func (tb *testBroker) audit(t *testing.T) string { return auditText(t, tb.dir, "bounded-query.jsonl") }

const (
	errBody = `{"status":"error"}`
	boolS   = `{"type":"boolean"}`
	constS  = `{"type":"const","value":42}`
	script  = "open('/query/out','w').write('true')\n"
)

func TestPipelineSuccessAndAudit(t *testing.T) {
	tb := newTestBroker(t, 32, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "internal"})
	got := tb.b.Handle(context.Background(), queryReq("O/R", boolS, script))
	assert.Equal(t, `{"status":"ok","result":true}`, string(got))
	require.Equal(t, 1, tb.rt.runs())
	assert.Equal(t, "/seeds/x", tb.rt.jobs[0].Repo)
	assert.Equal(t, []byte(script), tb.rt.jobs[0].Job.Script)
	assert.Equal(t, int64(59), tb.b.Ledger().Balance("o/r"))
	assert.Equal(t, 100*time.Millisecond, tb.clock.Now(), "answered at the 100 ms bucket")
	a := tb.audit(t)
	assert.Contains(t, a, `"kind":"invocation"`)
	assert.Contains(t, a, `"repo":"o/r","sensitivity":"internal","bits":5,"bucketMs":100`)
}

func TestPipelineFailuresAreIdentical(t *testing.T) {
	out := func(kind isolate.Kind, output string) func(isolate.Spec) isolate.Outcome {
		return func(isolate.Spec) isolate.Outcome {
			return isolate.Outcome{Kind: kind, Output: []byte(output), ExitCode: 1}
		}
	}
	cases := []struct {
		name    string
		req     *Request
		outcome func(isolate.Spec) isolate.Outcome
		reason  string
		runs    int
	}{
		{"invalid schema", queryReq("o/r", `{"type":"string"}`, script), nil, ReasonInvalidRequest, 0},
		{"empty script", queryReq("o/r", boolS, ""), nil, ReasonInvalidRequest, 0},
		{"bad slug", queryReq("o/..", boolS, script), nil, ReasonInvalidRequest, 0},
		{"unknown repo", queryReq("o/other", boolS, script), nil, ReasonRepoNotAllowed, 0},
		{"timeout", queryReq("o/r", boolS, script), out(isolate.KindTimeout, ""), ReasonTimeout, 1},
		{"crash", queryReq("o/r", boolS, script), out(isolate.KindNonzeroExit, ""), ReasonNonZeroExit, 1},
		{"nonconformant", queryReq("o/r", boolS, script), out(isolate.KindOK, `"yes"`), ReasonNonconformant, 1},
		{"oversized", queryReq("o/r", boolS, script), out(isolate.KindOutputTooLarge, ""), ReasonUnreadableOutput, 1},
		{"missing", queryReq("o/r", boolS, script), out(isolate.KindOutputMissing, ""), ReasonUnreadableOutput, 1},
		{"oom", queryReq("o/r", boolS, script), out(isolate.KindOOM, ""), "oom", 1},
		{"launch", queryReq("o/r", boolS, script), out(isolate.KindLaunchFailed, ""), ReasonLaunchFailed, 1},
		{"cleanup", queryReq("o/r", boolS, script), out(isolate.KindCleanupFailed, ""), ReasonCleanupFailed, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestBroker(t, 32, Seed{Repo: "o/r", Dir: "/seeds/x", Sensitivity: "public"})
			tb.rt.outcome = tc.outcome
			got := tb.b.Handle(context.Background(), tc.req)
			assert.Equal(t, errBody, string(got))
			assert.Equal(t, tc.runs, tb.rt.runs())
			assert.Contains(t, tb.audit(t), `"reason":"`+tc.reason+`"`)
		})
	}
}

func TestFramingRules(t *testing.T) {
	base := func() *Request { return queryReq("o/r", boolS, script) }
	cases := map[string]func(r *Request){
		"wrong version": func(r *Request) { r.Headers[0].Value = "1" },
		"missing repo":  func(r *Request) { r.Headers = r.Headers[:1] },
		"repeated repo": func(r *Request) { r.Headers = append(r.Headers, Header{"x-awf-repo", "o/r"}) },
		"extra awf":     func(r *Request) { r.Headers = append(r.Headers, Header{"X-AWF-Sensitivity", "public"}) },
		"padded schema": func(r *Request) { r.Headers[2].Value += "=" },
		"std alphabet": func(r *Request) {
			r.Headers[2].Value = base64.StdEncoding.EncodeToString([]byte(`{"type":"enum","values":["??>"]}`))
		},
		"body error":      func(r *Request) { r.BodyErr = errBodyTooLarge },
		"invalid utf8":    func(r *Request) { r.Body = []byte{0xff} },
		"schema too long": func(r *Request) { r.Headers[2].Value = strings.Repeat("A", 5467) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			tb := newTestBroker(t, 32, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
			r := base()
			mutate(r)
			assert.Equal(t, errBody, string(tb.b.Handle(context.Background(), r)))
			assert.Equal(t, 0, tb.rt.runs())
			assert.Equal(t, 1, tb.b.Used(), "framing failures count")
			assert.Equal(t, time.Duration(0), tb.clock.Now(), "pre-debit rejections answer at once")
		})
	}
	// Other headers are ignored.
	tb := newTestBroker(t, 32, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
	r := base()
	r.Headers = append(r.Headers, Header{"User-Agent", "curl/8"}, Header{"Accept", "*/*"})
	assert.Equal(t, `{"status":"ok","result":true}`, string(tb.b.Handle(context.Background(), r)))
}

func TestInvocationCounting(t *testing.T) {
	tb := newTestBroker(t, 3, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "sealed"})
	// Counted: invalid, unknown repo, budget-denied.
	for _, r := range []*Request{queryReq("o/r", `{}`, script), queryReq("x/y", boolS, script), queryReq("o/r", constS, script)} {
		assert.Equal(t, errBody, string(tb.b.Handle(context.Background(), r)))
	}
	assert.Equal(t, 3, tb.b.Used())
	assert.Equal(t, errBody, string(tb.b.Handle(context.Background(), queryReq("o/r", constS, script))))
	assert.Equal(t, 3, tb.b.Used(), "exhausted requests are not counted further")
	a := tb.audit(t)
	assert.Contains(t, a, `"invocationId":"budget","reason":"invocation-count-exhausted"`)
	assert.Contains(t, a, `"reason":"bit-budget-exhausted"`)
	assert.Equal(t, 0, tb.rt.runs(), "sealed never launches")

	// After Freeze nothing is counted.
	tb2 := newTestBroker(t, 3, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
	tb2.b.Freeze()
	assert.Equal(t, errBody, string(tb2.b.Handle(context.Background(), queryReq("o/r", boolS, script))))
	assert.Equal(t, 0, tb2.b.Used())
}

func TestLedgerThroughPipeline(t *testing.T) {
	tb := newTestBroker(t, 100,
		Seed{Repo: "o/conf", Dir: "/s1", Sensitivity: "confidential"},
		Seed{Repo: "o/int", Dir: "/s2", Sensitivity: "internal"},
		Seed{Repo: "o/seal", Dir: "/s3", Sensitivity: "sealed"},
		Seed{Repo: "o/pub", Dir: "/s4", Sensitivity: "public"})
	// The fake echoes the script as the output.
	tb.rt.outcome = func(s isolate.Spec) isolate.Outcome {
		return isolate.Outcome{Kind: isolate.KindOK, Output: s.Job.Script}
	}
	ok := func(repo, schema string) bool {
		out := map[string]string{boolS: "true", constS: "42"}[schema]
		return string(tb.b.Handle(context.Background(), queryReq(repo, schema, out))) != errBody
	}
	assert.True(t, ok("o/conf", constS))
	assert.True(t, ok("o/conf", constS))
	assert.False(t, ok("o/conf", constS))
	for i := 0; i < 12; i++ {
		assert.True(t, ok("o/int", boolS))
	}
	assert.False(t, ok("o/int", boolS))
	assert.True(t, ok("o/int", constS))
	assert.False(t, ok("o/int", constS))
	assert.False(t, ok("o/seal", constS))
	for i := 0; i < 20; i++ {
		assert.True(t, ok("o/pub", constS))
	}
}

func TestDebitBeforeLaunchNeverRefunded(t *testing.T) {
	tb := newTestBroker(t, 10, Seed{Repo: "o/c", Dir: "/s", Sensitivity: "confidential"})
	tb.rt.outcome = func(isolate.Spec) isolate.Outcome { return isolate.Outcome{Kind: isolate.KindNonzeroExit, ExitCode: 1} }
	assert.Equal(t, errBody, string(tb.b.Handle(context.Background(), queryReq("o/c", boolS, script))))
	assert.Equal(t, int64(3), tb.b.Ledger().Balance("o/c"))
}

func TestTimingOverflowDiscardsResult(t *testing.T) {
	tb := newTestBroker(t, 10, Seed{Repo: "o/p", Dir: "/s", Sensitivity: "public"})
	tb.rt.cost = 601 * time.Second
	assert.Equal(t, errBody, string(tb.b.Handle(context.Background(), queryReq("o/p", boolS, script))))
	assert.Contains(t, tb.audit(t), `"reason":"timing-bucket-overflow"`)
}
