package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/awf-project/awf/broker/jsonfile"
	"github.com/awf-project/awf/isolate"
)

// JobKind frames and builds one kind of job. The broker is generic over it.
type JobKind interface {
	// Name names the kind in audit file names and telemetry ("query").
	Name() string
	// Headers lists the lower-case framing headers the kind requires, each
	// exactly once; the first is the version header.
	Headers() []string
	// Version is the one accepted value of the version header.
	Version() string
	// MaxBody caps the request body in bytes.
	MaxBody() int
	// Frame validates the framing headers (lower-case name → value) and the
	// body, and returns the task. Errors are for the audit log only.
	Frame(headers map[string]string, body []byte) (Task, error)
}

// RoutedKind is a JobKind whose one route is not Route (sealed probes
// answer on /probe).
type RoutedKind interface {
	JobKind
	Route() string
}

// ErrorBodyKind is a JobKind whose one canonical failure body is not the
// bounded-query envelope (sealed probes answer {"result":"ERROR"}).
type ErrorBodyKind interface {
	JobKind
	ErrorBody() []byte
}

// KindRoute returns k's route: its own, or Route.
func KindRoute(k JobKind) string {
	if r, ok := k.(RoutedKind); ok {
		return r.Route()
	}
	return Route
}

// KindErrorBody returns k's canonical failure body: its own, or the
// bounded-query error envelope.
func KindErrorBody(k JobKind) []byte {
	if e, ok := k.(ErrorBodyKind); ok {
		return e.ErrorBody()
	}
	return errorBody
}

// Task is one validated request of some kind.
type Task interface {
	// Repo is the repository slug as the caller sent it.
	Repo() string
	// ChargeBits is what the task costs from the repository's budget.
	ChargeBits() int64
	// Job builds the sandbox job.
	Job(invocationID string) isolate.Job
	// Result validates a successful job's output and returns the canonical
	// success body. An error means nonconformant output.
	Result(output []byte) ([]byte, error)
}

// Header is one request header as received.
type Header struct {
	Name  string
	Value string
}

// Request is one HTTP request as the server read it.
type Request struct {
	Method  string
	Target  string
	Headers []Header
	Body    []byte
	// BodyErr is set when the body could not be read within its caps.
	BodyErr error
}

// errFraming marks a request the framing rules reject.
var errFraming = errors.New("framing")

// frame applies the framing rules shared by every kind: every x-awf-*
// header is one the kind requires, none is repeated, all are present, and
// the version matches; then the kind validates the values and the body.
func frame(k JobKind, r *Request) (Task, string, error) {
	if r.BodyErr != nil {
		return nil, ReasonBodyRejected, fmt.Errorf("%w: body: %w", errFraming, r.BodyErr)
	}
	want := k.Headers()
	vals := map[string]string{}
	for _, h := range r.Headers {
		name := strings.ToLower(h.Name)
		if !strings.HasPrefix(name, "x-awf-") {
			continue
		}
		if !slices.Contains(want, name) {
			return nil, ReasonFrameRejected, fmt.Errorf("%w: unexpected header %s", errFraming, name)
		}
		if _, dup := vals[name]; dup {
			return nil, ReasonFrameRejected, fmt.Errorf("%w: repeated header %s", errFraming, name)
		}
		vals[name] = h.Value
	}
	for _, name := range want {
		if _, ok := vals[name]; !ok {
			return nil, ReasonFrameRejected, fmt.Errorf("%w: missing header %s", errFraming, name)
		}
	}
	if v := vals[want[0]]; v != k.Version() {
		return nil, ReasonFrameRejected, fmt.Errorf("%w: %s is %q, want %q", errFraming, want[0], jsonfile.Clip(v, 16), k.Version())
	}
	t, err := k.Frame(vals, r.Body)
	if err != nil {
		return nil, ReasonInvalidRequest, err
	}
	return t, "", nil
}

// ClassedKind is a JobKind whose jobs are not ClassQuery in telemetry.
type ClassedKind interface {
	JobKind
	TelemetryClass() string
}

// KindClass returns the telemetry lifecycle class of k's jobs: its own, or
// ClassInvocation for bounded agents (the seed's class for them), or
// ClassQuery for every other kind (bounded queries, sealed probes).
func KindClass(k JobKind) string {
	if c, ok := k.(ClassedKind); ok {
		return c.TelemetryClass()
	}
	if _, ok := k.(*AgentKind); ok {
		return ClassInvocation
	}
	return ClassQuery
}
