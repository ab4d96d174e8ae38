package broker

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/awf-project/awf/broker/jsonfile"
	"github.com/awf-project/awf/proto"
)

// Failure reasons written to the audit log. The first group matches the
// reference protocol's labels; sandbox outcome kinds that have no reference
// label (oom, pids-limit, file-size-limit, seccomp-kill) are used as reasons
// themselves, and every post-launch failure also carries its outcome kind.
const (
	ReasonInvalidRequest   = "invalid-request"
	ReasonRepoNotAllowed   = "repo-not-allowed"
	ReasonBudgetExhausted  = "bit-budget-exhausted"
	ReasonCountExhausted   = "invocation-count-exhausted"
	ReasonTimeout          = "timeout"
	ReasonNonZeroExit      = "non-zero-exit"
	ReasonUnreadableOutput = "unreadable-output"
	ReasonNonconformant    = "nonconformant-output"
	ReasonLaunchFailed     = "launch-failed"
	ReasonCleanupFailed    = "cleanup-failed"
	ReasonBucketOverflow   = "timing-bucket-overflow"
	ReasonUnexpected       = "unexpected-error"
	ReasonBodyRejected     = "body-rejected"
	ReasonFrameRejected    = "frame-rejected"
	ReasonHeaderRejected   = "header-rejected"
	ReasonConnectionLimit  = "connection-limit"
	ReasonWrongRoute       = "wrong-route"
	ReasonUnhandled        = "unhandled-error"
	// The agent could not be frozen before, or thawed after, a metered query.
	ReasonAgentFreezeFailed = "agent-freeze-failed"
	ReasonAgentThawFailed   = "agent-thaw-failed"
)

// LifecycleCancelled is the lifecycle event of a run that awf stopped on
// SIGINT or SIGTERM (or whose in-flight queries the broker's shutdown
// killed): a stop that was asked for, not a failure.
const LifecycleCancelled = "cancelled"

// Pseudo invocation ids for records that belong to no invocation.
const (
	IDBudget    = "budget"
	IDQueue     = "queue"
	IDFraming   = "framing"
	IDTransport = "transport"
	IDServer    = "server"
)

// maxDetail caps a failure record's detail, in bytes.
const maxDetail = 500

// Record is one audit line. Fields that do not apply to a kind are omitted.
type Record struct {
	TS           string `json:"ts"`
	Kind         string `json:"kind"` // invocation, failure, lifecycle
	InvocationID string `json:"invocationId,omitempty"`
	Repo         string `json:"repo,omitempty"`
	Sensitivity  string `json:"sensitivity,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	Bits         *int64 `json:"bits,omitempty"`
	BucketMs     *int64 `json:"bucketMs,omitempty"`
	// ElapsedMs is the measured processing time before the bucket wait.
	ElapsedMs *int64 `json:"elapsedMs,omitempty"`
	Event     string `json:"event,omitempty"`
	Detail    string `json:"detail,omitempty"`
	// ScriptSHA256 and SchemaSHA256 say what was asked without keeping it:
	// the hex sha256 of the script body and of the canonical schema text
	// (CanonicalSchema). Set on the invocation and failure records of a
	// request that was framed.
	ScriptSHA256 string `json:"scriptSha256,omitempty"`
	SchemaSHA256 string `json:"schemaSha256,omitempty"`
	// AWFVersion (proto.Version) and CIRunID (GITHUB_RUN_ID of the process
	// that wrote the record, when set) are stamped on every record by Write.
	AWFVersion string `json:"awfVersion,omitempty"`
	CIRunID    string `json:"ciRunId,omitempty"`
}

// Audit is the protected audit log: JSONL appended to a 0600 file in a 0700
// directory of the private root. It is never visible to the agent.
type Audit struct {
	log *jsonfile.Log // on the opened file
	now func() time.Time
	// version and ciRunID are stamped on every record.
	version, ciRunID string
}

// OpenAudit creates dir (0700) if needed and opens name in it for appending
// (0600, no symlink follow).
func OpenAudit(dir, name string) (*Audit, error) {
	f, err := openProtected(dir, name)
	if err != nil {
		return nil, err
	}
	return &Audit{log: jsonfile.NewLog(f, "awf broker"), now: time.Now, version: proto.Version(), ciRunID: os.Getenv("GITHUB_RUN_ID")}, nil
}

func openProtected(dir, name string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit dir %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit dir %s: %w", dir, err)
	}
	p := filepath.Join(dir, name)
	f, err := jsonfile.OpenAppend(p)
	if err != nil {
		return nil, fmt.Errorf("audit log %s: %w", p, err)
	}
	return f, nil
}

// Write appends one record, stamping its time.
func (a *Audit) Write(r Record) {
	if a == nil {
		return
	}
	r.TS = a.now().UTC().Format(time.RFC3339Nano)
	r.AWFVersion, r.CIRunID = a.version, a.ciRunID
	r.Detail = jsonfile.Clip(r.Detail, maxDetail)
	a.log.Append(r)
}

// Failure appends a failure record.
func (a *Audit) Failure(id, reason, detail string) {
	a.Write(Record{Kind: "failure", InvocationID: id, Reason: reason, Detail: detail})
}

// Lifecycle appends a lifecycle record.
func (a *Audit) Lifecycle(event, detail string) {
	a.Write(Record{Kind: "lifecycle", Event: event, Detail: detail})
}

// maxAuditLine bounds one line ReadAudit reads: a record is a few hundred
// bytes, its detail capped at maxDetail.
const maxAuditLine = 1 << 20

// ReadAudit reads back an audit log that Audit wrote: every record, in
// order. A malformed line is an error naming the file and the line.
func ReadAudit(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	var recs []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxAuditLine)
	for n := 1; sc.Scan(); n++ {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	return recs, nil
}

// Close closes the log.
func (a *Audit) Close() error {
	if a == nil {
		return nil
	}
	return a.log.Close()
}

// Telemetry lifecycle classes and capability states: the seed's sets. A
// bounded-agent job's class is ClassInvocation where a query's is
// ClassQuery (KindClass).
const (
	ClassPreflight  = "preflight"
	ClassStartup    = "startup"
	ClassQuery      = "query"
	ClassInvocation = "invocation"
	ClassCleanup    = "cleanup"

	StateSupported   = "supported"
	StateUnavailable = "unavailable"
	StateBlocked     = "blocked"
)

// CategoryUnknown stands in for a category that is not a short lower-case
// label, so that no free text (a path, a repository name) reaches telemetry.
const CategoryUnknown = "unknown"

var telemetryCategory = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`) })

// NewTelemetry returns the record for one event. A class or state outside
// the seed's sets, and a backend or category that is not a short lower-case
// label, becomes CategoryUnknown: the record always has exactly its five
// fields and never carries free text.
func NewTelemetry(primary, query, class, state, category string) Telemetry {
	label := func(s string) string {
		if telemetryCategory().MatchString(s) {
			return s
		}
		return CategoryUnknown
	}
	switch class {
	case ClassPreflight, ClassStartup, ClassQuery, ClassInvocation, ClassCleanup:
	default:
		class = CategoryUnknown
	}
	switch state {
	case StateSupported, StateUnavailable, StateBlocked:
	default:
		state = CategoryUnknown
	}
	return Telemetry{label(primary), label(query), class, state, label(category)}
}

// WriteTelemetry writes one record as a JSON line to w: how host preflight
// logs the record before (or without) a run's protected telemetry file.
func WriteTelemetry(w io.Writer, t Telemetry) error {
	line, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	return nil
}

// Telemetry is the narrow runtime telemetry record: backends, lifecycle
// class, capability state and a category. It never holds repository names,
// scripts, outputs, paths or credentials.
type Telemetry struct {
	PrimaryBackend  string `json:"primaryBackend"`
	QueryBackend    string `json:"queryBackend"`
	LifecycleClass  string `json:"lifecycleClass"`  // ClassPreflight … ClassCleanup
	CapabilityState string `json:"capabilityState"` // StateSupported, StateUnavailable, StateBlocked
	Category        string `json:"category"`
}

// TelemetryLog appends Telemetry records to runtime-telemetry.jsonl.
type TelemetryLog struct {
	mu      sync.Mutex
	f       *os.File
	primary string
	backend string
}

// OpenTelemetry opens dir/runtime-telemetry.jsonl (0600) for the given backends.
func OpenTelemetry(dir, primary, backend string) (*TelemetryLog, error) {
	f, err := openProtected(dir, "runtime-telemetry.jsonl")
	if err != nil {
		return nil, err
	}
	return &TelemetryLog{f: f, primary: primary, backend: backend}, nil
}

// Emit appends one record.
func (t *TelemetryLog) Emit(class, state, category string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := WriteTelemetry(t.f, NewTelemetry(t.primary, t.backend, class, state, category)); err != nil {
		fmt.Fprintf(os.Stderr, "awf broker: %v\n", err)
	}
}

// Close closes the log.
func (t *TelemetryLog) Close() error {
	if t == nil {
		return nil
	}
	return t.f.Close()
}

// digestedTask is a Task whose audit record says what was asked without
// keeping it: its text (a script, or an agent's task) and its schema (a
// probe's is the closed one the broker built).
type digestedTask interface {
	Task
	digested() (text []byte, schema *proto.Schema)
}

// taskDigests returns the hex sha256 of a task's text and of its canonical
// schema, for the audit record; empty for kinds that have neither.
func taskDigests(t Task) (script, schema string) {
	d, ok := t.(digestedTask)
	if !ok {
		return "", ""
	}
	text, s := d.digested()
	sum := sha256.Sum256(text)
	script = hex.EncodeToString(sum[:])
	if c, err := CanonicalSchema(s.Compact()); err == nil {
		sum = sha256.Sum256(c)
		schema = hex.EncodeToString(sum[:])
	}
	return script, schema
}

// CanonicalSchema is a schema's text with object keys sorted, no whitespace
// and numbers as written, so the same schema sent with another key order or
// spacing has the same digest. The input is already strictly parsed (no
// duplicate keys).
func CanonicalSchema(compact []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(compact))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical schema: %w", err)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical schema: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
