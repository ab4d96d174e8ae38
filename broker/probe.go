package broker

import (
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// ProbeKind is the sealed-probe job kind (v1 of the original design): a
// Python script, one repository and exactly three caller outcomes. The
// broker builds the closed schema from the outcomes plus ERROR; the caller
// sees one of those four symbols and nothing else. It runs on the shared
// pipeline: the framing rules of frame, the invocation count, the one lane,
// the sandbox, the strict result check and the timing buckets are the
// bounded query's. Only the count budgets it: a probe charges no bits (its
// seeds carry SensitivitySealed, which is metered, so the agent is frozen
// while each probe runs, and a zero charge always fits).
type ProbeKind struct{}

// Name implements JobKind.
func (ProbeKind) Name() string { return "probe" }

// Headers implements JobKind: version, repository, then the three outcomes.
func (ProbeKind) Headers() []string { return proto.ProbeHeaderNames() }

// Version implements JobKind.
func (ProbeKind) Version() string { return proto.ProbeProtocolVersion }

// MaxBody implements JobKind. The script cap is the query's; the whole
// request (head and body) stays far below the reference's 256 KiB.
func (ProbeKind) MaxBody() int { return proto.MaxProbeScriptBytes }

// Route implements RoutedKind.
func (ProbeKind) Route() string { return proto.ProbeRoute }

// ErrorBody implements ErrorBodyKind.
func (ProbeKind) ErrorBody() []byte { return []byte(proto.ProbeErrorBody) }

// Frame implements JobKind: the repository, the outcomes and the script are
// checked, and the closed schema built, before anything is copied or run.
func (ProbeKind) Frame(h map[string]string, body []byte) (Task, error) {
	r, err := proto.ValidateProbeRequest(h[proto.HeaderRepo],
		[]string{h[proto.HeaderOutcome1], h[proto.HeaderOutcome2], h[proto.HeaderOutcome3]}, body)
	if err != nil {
		return nil, err
	}
	return probeTask{r}, nil
}

type probeTask struct{ r *proto.ProbeRequest }

func (t probeTask) Repo() string { return t.r.Repo }

// ChargeBits is zero: the invocation count is a probe's only budget.
func (t probeTask) ChargeBits() int64 { return 0 }

func (t probeTask) Job(id string) isolate.Job {
	return isolate.Job{InvocationID: id, Script: t.r.Script}
}

// Result implements Task: the canonical {"result":"<outcome>"}, or an
// error for anything else, a script-written ERROR included.
func (t probeTask) Result(out []byte) ([]byte, error) { return t.r.CheckResult(out) }

func (t probeTask) digested() ([]byte, *proto.Schema) { return t.r.Script, t.r.Schema }
