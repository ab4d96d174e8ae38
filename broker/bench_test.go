package broker

import (
	"context"
	"testing"

	"github.com/awf-project/awf/isolate"
)

// BenchmarkPipelineNoSandbox measures the broker's own cost per request
// (framing, schema parse, ledger, result check, audit write) with a runtime
// that does nothing and a clock that never sleeps.
func BenchmarkPipelineNoSandbox(b *testing.B) {
	tb := newTestBroker(b, MaxInvocationsCap, Seed{Repo: "o/r", Dir: "/s", Sensitivity: "public"})
	tb.rt.cost = 0
	req := queryReq("o/r", `{"type":"object","fields":{"a":{"type":"boolean"},"b":{"type":"integer","minimum":0,"maximum":255}}}`, `{"b":7,"a":true}`)
	tb.rt.outcome = func(s isolate.Spec) isolate.Outcome {
		return isolate.Outcome{Kind: isolate.KindOK, Output: s.Job.Script}
	}
	b.ReportAllocs()
	for b.Loop() {
		tb.b.mu.Lock()
		tb.b.used = 0 // the cap is not what this measures
		tb.b.mu.Unlock()
		if out := tb.b.Handle(context.Background(), req); string(out) == errBody {
			b.Fatal("error")
		}
	}
}
