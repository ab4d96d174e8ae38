package broker

import (
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// QueryKind is the bounded-query job kind: a Python script and a finite schema.
type QueryKind struct{}

// Name implements JobKind.
func (QueryKind) Name() string { return "query" }

// Headers implements JobKind. The names and the version are proto's, which
// the client reads too.
func (QueryKind) Headers() []string { return proto.QueryHeaderNames() }

// Version implements JobKind.
func (QueryKind) Version() string { return proto.QueryVersionValue() }

// MaxBody implements JobKind.
func (QueryKind) MaxBody() int { return proto.MaxScriptBytes }

// Frame implements JobKind.
func (QueryKind) Frame(h map[string]string, body []byte) (Task, error) {
	r, err := proto.ValidateRequest(h[proto.HeaderRepo], h[proto.HeaderSchema], body)
	if err != nil {
		return nil, err
	}
	return queryTask{r}, nil
}

type queryTask struct{ r *proto.Request }

func (t queryTask) Repo() string      { return t.r.Repo }
func (t queryTask) ChargeBits() int64 { return t.r.Schema.ChargeBits() }

func (t queryTask) digested() ([]byte, *proto.Schema) { return t.r.Script, t.r.Schema }

func (t queryTask) Job(id string) isolate.Job {
	return isolate.Job{InvocationID: id, Script: t.r.Script}
}

func (t queryTask) Result(out []byte) ([]byte, error) {
	c, err := t.r.Schema.CheckResult(out)
	if err != nil {
		return nil, err
	}
	return proto.OKEnvelope(c), nil
}
