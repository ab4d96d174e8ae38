package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/awf-project/awf/broker/agentloop"
	"github.com/awf-project/awf/isolate"
	"github.com/awf-project/awf/proto"
)

// The bounded-agent kind: a fixed awf model loop, run in a fresh enclave
// whose only network peer is the API proxy, reads one repository's
// immutable seed and answers one value of a finite schema. It goes through
// the same pipeline as a bounded query (framing, seed map, ledger, charge,
// bucket, envelope, audit), on a broker of its own: its own socket, seeds,
// private root, ledger and maxInvocations, so that spending on one
// subsystem never consumes the other's balance.

// Paths inside the enclave (the enclave contract, owned by agentloop).
// Everything is read-only but the two tmpfs mounts, EnclaveOutDir and
// EnclaveTmpDir.
const (
	EnclaveRepoDir        = agentloop.RepoDir
	EnclaveTaskPath       = agentloop.TaskPath
	EnclaveSchemaPath     = agentloop.SchemaPath
	EnclaveLoopConfigPath = agentloop.ConfigPath
	EnclaveLoopPath       = agentloop.BinaryPath
	EnclaveOutDir         = agentloop.OutDir
	EnclaveResultPath     = agentloop.ResultPath
	EnclaveTranscriptPath = agentloop.TranscriptPath
	EnclaveTmpDir         = agentloop.TmpDir
)

// MaxTranscriptBytes caps the transcript the broker keeps per invocation:
// the loop's own cap, so that its final line always fits.
const MaxTranscriptBytes = agentloop.MaxTranscriptBytes

// AnthropicVersion is the anthropic-version the loop pins.
const AnthropicVersion = "2023-06-01"

// LoopConfig is /enclave/loop.json: what the fixed loop needs and nothing
// it could use to reach anything but the proxy.
type LoopConfig = agentloop.Config

// CapabilityIssuer issues and revokes per-invocation API-proxy
// capabilities (the proxy process's control channel).
type CapabilityIssuer interface {
	// Issue returns a new capability for caller with at most maxRequests
	// forwarded requests and maxTokens per request.
	Issue(ctx context.Context, caller string, maxRequests, maxTokens int) (string, error)
	// Revoke ends a capability.
	Revoke(ctx context.Context, token string) error
}

// EnclaveCaller is the proxy caller name of one invocation's capability.
func EnclaveCaller(invocationID string) string { return "enclave-" + invocationID }

// AgentOptions configure the bounded-agent kind, from the trusted config
// only: nothing here is reachable from a request.
type AgentOptions struct {
	// MaxTaskBytes caps the task (1..proto.MaxAgentTaskBytes).
	MaxTaskBytes int
	// MaxOutputBytes caps result.json (1..proto.MaxResultBytes).
	MaxOutputBytes int
	// Profile ("openai" or "anthropic") and Model are fixed per run.
	Profile, Model string
	// Proxy is the API proxy's address as the enclave reaches it: the
	// enclave's only peer.
	Proxy netip.AddrPort
	// MaxModelRequests and MaxModelTokens bound each capability.
	MaxModelRequests, MaxModelTokens int
	// Timeout is the invocation's wall-clock limit.
	Timeout time.Duration
	// Limits are the enclave's resource limits (memory, CPU, pids, file
	// size, tmpfs sizes); Wall is set from Timeout.
	Limits isolate.Limits
	// LoopBinary is the host path of the static loop binary.
	LoopBinary string
	// Issuer issues the per-invocation capabilities. Required.
	Issuer CapabilityIssuer
	// TranscriptDir is where transcripts go: in the protected audit
	// directory, never visible to the agent.
	TranscriptDir string
	// Now is the wall clock (for the loop's deadline); nil = time.Now.
	Now func() time.Time
}

// AgentKind is the bounded-agent job kind.
type AgentKind struct{ o AgentOptions }

// NewAgentKind checks o and returns the kind.
func NewAgentKind(o AgentOptions) (*AgentKind, error) {
	bad := func(format string, args ...any) (*AgentKind, error) {
		return nil, fmt.Errorf("bounded agents: "+format, args...)
	}
	switch {
	case o.MaxTaskBytes < 1 || o.MaxTaskBytes > proto.MaxAgentTaskBytes:
		return bad("maxTaskBytes %d must be in 1..%d", o.MaxTaskBytes, proto.MaxAgentTaskBytes)
	case o.MaxOutputBytes < 1 || o.MaxOutputBytes > proto.MaxResultBytes:
		return bad("maxOutputBytes %d must be in 1..%d", o.MaxOutputBytes, proto.MaxResultBytes)
	case o.Profile != agentloop.ProfileOpenAI && o.Profile != agentloop.ProfileAnthropic:
		return bad("profile %q must be openai or anthropic", o.Profile)
	case !proto.ValidModelName(o.Model):
		return bad("model %q is not a model name", o.Model)
	case !o.Proxy.IsValid() || o.Proxy.Port() == 0:
		return bad("no API-proxy address for the enclave")
	case !o.Proxy.Addr().Is4() || !o.Proxy.Addr().IsLinkLocalUnicast():
		// The enclave link is link-local: no route, nothing else on it.
		return bad("the enclave's proxy address %s must be IPv4 link-local", o.Proxy)
	case o.MaxModelRequests < 1 || o.MaxModelTokens < 1:
		return bad("maxModelRequests and maxModelTokens must be positive")
	case o.Timeout <= 0 || o.Timeout > proto.MaxQueryTimeoutSeconds*time.Second:
		return bad("timeout %v must be in (0, %ds]", o.Timeout, proto.MaxQueryTimeoutSeconds)
	case !filepath.IsAbs(o.LoopBinary):
		return bad("loop binary %q must be an absolute path", o.LoopBinary)
	case o.Issuer == nil:
		return bad("no capability issuer (the API proxy's control channel)")
	case !filepath.IsAbs(o.TranscriptDir):
		return bad("transcript directory %q must be an absolute path", o.TranscriptDir)
	}
	o.Limits.Wall = o.Timeout
	o.Limits.OutputBytes = int64(o.MaxOutputBytes)
	if err := o.Limits.Validate(); err != nil {
		return bad("%v", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &AgentKind{o: o}, nil
}

// Name implements JobKind.
func (*AgentKind) Name() string { return "agent" }

// Headers implements JobKind.
func (*AgentKind) Headers() []string { return proto.AgentHeaderNames() }

// Version implements JobKind.
func (*AgentKind) Version() string { return proto.AgentProtocolVersion }

// MaxBody implements JobKind.
func (k *AgentKind) MaxBody() int { return k.o.MaxTaskBytes }

// Frame implements JobKind: a bare slug, a finite schema, and a non-empty
// UTF-8 task of at most maxTaskBytes. Every problem is reported, for the
// audit log only.
func (k *AgentKind) Frame(h map[string]string, body []byte) (Task, error) {
	var errs []error
	repo := h[proto.HeaderRepo]
	if err := proto.ValidateRepoSlug(repo); err != nil {
		errs = append(errs, err)
	}
	var schema *proto.Schema
	text, err := proto.DecodeSchemaHeader(h[proto.HeaderSchema])
	if err != nil {
		errs = append(errs, err)
	} else if schema, err = proto.ParseSchema(text); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", proto.ErrRequest, err))
	}
	if err := ValidateTask(body, k.o.MaxTaskBytes); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &agentTask{k: k, repo: repo, schema: schema, task: body}, nil
}

// ValidateTask checks a task body: non-empty, valid UTF-8, at most max
// bytes. The CLI applies the same rule before sending.
func ValidateTask(b []byte, max int) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%w: task is empty", proto.ErrRequest)
	case len(b) > max:
		return fmt.Errorf("%w: task is %d bytes; the maximum is %d", proto.ErrRequest, len(b), max)
	case !utf8.Valid(b):
		return fmt.Errorf("%w: task is not valid UTF-8", proto.ErrRequest)
	}
	return nil
}

// agentTask is one framed bounded-agent request. capability is set by
// begin and cleared by end; the lane runs one task at a time.
type agentTask struct {
	k          *AgentKind
	repo       string
	schema     *proto.Schema
	task       []byte
	capability string
}

func (t *agentTask) Repo() string      { return t.repo }
func (t *agentTask) ChargeBits() int64 { return t.schema.ChargeBits() }

// Job implements Task: the loop is the enclave's one program. A runtime
// that is not an EnclaveRunner never gets it (runJob fails closed).
func (t *agentTask) Job(id string) isolate.Job {
	return isolate.Job{InvocationID: id, Argv: []string{EnclaveLoopPath}}
}

// Result implements Task: result.json parsed strictly (no duplicate keys,
// no trailing bytes), checked against the schema and canonicalised.
func (t *agentTask) Result(out []byte) ([]byte, error) {
	if len(out) > t.k.o.MaxOutputBytes {
		return nil, fmt.Errorf("%w: result is %d bytes; maxOutputBytes is %d", proto.ErrJSON, len(out), t.k.o.MaxOutputBytes)
	}
	c, err := t.schema.CheckResult(out)
	if err != nil {
		return nil, err
	}
	return proto.OKEnvelope(c), nil
}

// digested stands the task text for the script in the audit record.
func (t *agentTask) digested() ([]byte, *proto.Schema) { return t.task, t.schema }

// EnclaveFile is one read-only file the enclave is given.
type EnclaveFile struct {
	Path    string // inside the enclave
	Content []byte
}

// Enclave is the complete description of one invocation's enclave, built
// from the trusted config and broker-generated identifiers only. A runner
// renders it on its backend and must refuse what it cannot enforce.
type Enclave struct {
	InvocationID string
	// SeedDir is the immutable seed, bound read-only at EnclaveRepoDir:
	// there is no writable copy.
	SeedDir string
	// Files are task, schema and loop config, each read-only.
	Files []EnclaveFile
	// LoopBinary is bound read-only at EnclaveLoopPath.
	LoopBinary string
	Argv       []string
	// Env is the whole environment: no credential, token or proxy variable.
	Env []string
	// UID and GID are fixed and non-root; there are no capabilities and
	// no-new-privileges is set.
	UID, GID        int
	NoNewPrivileges bool
	// Limits: memory (swap off), CPU, pids, file size, wall clock; the
	// two writable mounts, EnclaveOutDir and EnclaveTmpDir, are tmpfs of
	// Limits.QueryTmpfsBytes and Limits.TmpTmpfsBytes.
	Limits isolate.Limits
	// Proxy is the enclave's only peer. A runner that cannot give the
	// enclave a network whose only reachable address is this one must
	// refuse to run it: never host networking, never a wider network.
	Proxy netip.AddrPort
	// ResultBytes and TranscriptBytes cap what the runner reads back.
	ResultBytes, TranscriptBytes int64
}

// enclaveEnv is the enclave's whole environment.
var enclaveEnv = []string{"PATH=/enclave/bin", "LANG=C.UTF-8", "HOME=/tmp"}

// Enclave builds the invocation's enclave. begin must have issued the
// capability.
func (t *agentTask) Enclave(id, seedDir string) (Enclave, error) {
	if t.capability == "" {
		return Enclave{}, errors.New("enclave: no capability issued")
	}
	o := t.k.o
	// The loop stops before the enclave's wall limit, so that a late
	// answer is the loop's "deadline" state and not a kill.
	margin := min(2*time.Second, o.Timeout/4)
	cfg := LoopConfig{
		Profile:           o.Profile,
		Model:             o.Model,
		Endpoint:          "http://" + o.Proxy.String(),
		Capability:        t.capability,
		MaxModelRequests:  o.MaxModelRequests,
		MaxModelTokens:    o.MaxModelTokens,
		MaxOutputBytes:    o.MaxOutputBytes,
		DeadlineUnixMilli: o.Now().Add(o.Timeout - margin).UnixMilli(),
		AnthropicVersion:  AnthropicVersion,
	}
	loop, err := json.Marshal(cfg)
	if err != nil {
		return Enclave{}, fmt.Errorf("enclave: loop config: %w", err)
	}
	schema, err := CanonicalSchema(t.schema.Compact())
	if err != nil {
		return Enclave{}, err
	}
	e := t.k.shape(id, seedDir)
	e.Files = []EnclaveFile{
		{Path: EnclaveTaskPath, Content: t.task},
		{Path: EnclaveSchemaPath, Content: schema},
		{Path: EnclaveLoopConfigPath, Content: loop},
	}
	return e, nil
}

// shape is every invocation's enclave against seedDir but its files (task,
// schema, loop config): what the trusted config fixes. An enclave prepared
// ahead is prepared to this shape (with no id), and only an invocation of
// the same shape may take it.
func (k *AgentKind) shape(id, seedDir string) Enclave {
	o := k.o
	return Enclave{
		InvocationID:    id,
		SeedDir:         seedDir,
		LoopBinary:      o.LoopBinary,
		Argv:            []string{EnclaveLoopPath},
		Env:             append([]string(nil), enclaveEnv...),
		UID:             isolate.SandboxUID,
		GID:             isolate.SandboxGID,
		NoNewPrivileges: true,
		Limits:          o.Limits,
		Proxy:           o.Proxy,
		ResultBytes:     int64(o.MaxOutputBytes),
		TranscriptBytes: MaxTranscriptBytes,
	}
}

// SameShape reports whether e and f are the same enclave but for their
// InvocationID and Files: whether an enclave prepared ahead as f may run
// the invocation e.
func (e Enclave) SameShape(f Enclave) bool {
	return e.SeedDir == f.SeedDir && e.LoopBinary == f.LoopBinary && slices.Equal(e.Argv, f.Argv) &&
		slices.Equal(e.Env, f.Env) && e.UID == f.UID && e.GID == f.GID && e.NoNewPrivileges == f.NoNewPrivileges &&
		e.Limits == f.Limits && e.Proxy == f.Proxy && e.ResultBytes == f.ResultBytes && e.TranscriptBytes == f.TranscriptBytes
}

// Validate reports the first control the description lacks. Runners call
// it first and refuse an enclave that fails it.
func (e Enclave) Validate() error {
	switch {
	case e.UID == 0 || e.GID == 0:
		return errors.New("enclave: uid and gid must not be root")
	case !e.NoNewPrivileges:
		return errors.New("enclave: no-new-privileges is required")
	case !e.Proxy.IsValid() || !e.Proxy.Addr().IsLinkLocalUnicast():
		return errors.New("enclave: no link-local proxy peer: refusing to run without the enclave network")
	case !filepath.IsAbs(e.SeedDir) || !filepath.IsAbs(e.LoopBinary):
		return errors.New("enclave: seed and loop binary must be absolute host paths")
	case e.ResultBytes <= 0 || e.ResultBytes > proto.MaxResultBytes:
		return errors.New("enclave: result cap out of range")
	}
	return e.Limits.Validate()
}

// EnclaveOutcome is what a runner reports: the outcome (Output is
// result.json) and the bounded transcript, for the audit directory only.
type EnclaveOutcome struct {
	isolate.Outcome
	Transcript []byte
}

// EnclaveRunner is a runtime that can run an enclave: the seed read-only,
// the files read-only, bounded tmpfs for the result and /tmp, and a network
// whose only peer is Enclave.Proxy. RunEnclave prepares (or, for an
// EnclavePooler, takes one prepared ahead for exactly this template and
// shape), runs and destroys one single-use enclave; the destroy is inside
// the call.
type EnclaveRunner interface {
	RunEnclave(ctx context.Context, t isolate.Template, e Enclave) EnclaveOutcome
}

// runJob runs a task's job. A query or probe runs in a sandbox from the
// warm pool when there is one (a cold one when the pool has none for the
// template), else in one the runtime prepares now; either way inside the
// request's measured window, and destroyed before it ends. A bounded-agent
// task gets its capability first, runs on an EnclaveRunner only (any other runtime fails closed:
// an enclave never runs as a query sandbox), in an enclave the runner
// prepared ahead when it has one of exactly this template and shape, and has the capability
// revoked after the enclave is torn down; a revocation that fails turns
// the outcome into a cleanup failure.
func (b *Broker) runJob(ctx context.Context, t isolate.Template, id string, task Task) isolate.Outcome {
	at, ok := task.(*agentTask)
	if !ok {
		s := isolate.Spec{Template: t, Job: task.Job(id)}
		if b.pool != nil {
			return b.pool.Run(ctx, s)
		}
		return b.o.Runtime.Run(ctx, s)
	}
	er, ok := b.o.Runtime.(EnclaveRunner)
	if !ok {
		return isolate.Err(isolate.KindLaunchFailed, "runtime %s cannot run an enclave", b.o.Runtime.Name())
	}
	iss := at.k.o.Issuer
	tok, err := iss.Issue(ctx, EnclaveCaller(id), at.k.o.MaxModelRequests, at.k.o.MaxModelTokens)
	if err != nil {
		return isolate.Err(isolate.KindLaunchFailed, "issue the enclave's capability: %v", err)
	}
	at.capability = tok
	defer func() { at.capability = "" }()
	o := func() isolate.Outcome {
		e, err := at.Enclave(id, t.Repo)
		if err == nil {
			err = e.Validate()
		}
		if err != nil {
			return isolate.Err(isolate.KindLaunchFailed, "%v", err)
		}
		eo := er.RunEnclave(ctx, t, e)
		if len(eo.Transcript) > 0 {
			if err := SaveTranscript(at.k.o.TranscriptDir, id, eo.Transcript); err != nil {
				b.o.Audit.Lifecycle("transcript-failed", err.Error())
			}
		}
		// The loop's terminal state is the audit category of the outcome
		// (operator only, like every reason): "loop=provider_error".
		if st := LoopState(eo.Transcript); st != "" {
			eo.Detail = strings.TrimSpace("loop=" + st + " " + eo.Detail)
		}
		return eo.Outcome
	}()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := iss.Revoke(rctx, tok); err != nil {
		b.o.Audit.Lifecycle("capability-revoke-failed", "caller="+EnclaveCaller(id)+": "+err.Error())
		return isolate.Err(isolate.KindCleanupFailed, "revoke the enclave's capability: %v (outcome was %s)", err, o.Kind)
	}
	return o
}

// loopStates are the loop's terminal states (agentloop.State*).
var loopStates = []string{
	agentloop.StateOK, agentloop.StateTruncated, agentloop.StateNoToolCall, agentloop.StateTokenBudget,
	agentloop.StateRequestBudget, agentloop.StateProviderError, agentloop.StateDeadline,
	agentloop.StateResultTooLarge, agentloop.StateBadInput, agentloop.StateOutputError,
}

// LoopState reads the loop's terminal state from the last line of its
// transcript ({"type":"end","state":...}): one of the loop's states,
// "unknown" for a last line that names another, "" when there is none.
// The enclave wrote the transcript, so nothing else of it is trusted.
func LoopState(transcript []byte) string {
	tr := bytes.TrimRight(transcript, "\n")
	if len(tr) == 0 {
		return ""
	}
	last := tr[bytes.LastIndexByte(tr, '\n')+1:]
	var end struct {
		Type  string `json:"type"`
		State string `json:"state"`
	}
	if json.Unmarshal(last, &end) != nil || end.Type != "end" {
		return ""
	}
	if slices.Contains(loopStates, end.State) {
		return end.State
	}
	return "unknown"
}

// SaveTranscript writes one invocation's transcript, cut to
// MaxTranscriptBytes, to dir/<id>.jsonl (0600, in a 0700 dir, exclusive,
// no symlink follow). The directory is in the protected audit directory:
// the operator reads it, the agent never can.
func SaveTranscript(dir, id string, b []byte) error {
	if !validInvocationID(id) {
		return fmt.Errorf("transcript: invocation id %q", id)
	}
	if len(b) > MaxTranscriptBytes {
		b = b[:MaxTranscriptBytes]
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	p := filepath.Join(dir, id+".jsonl")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("transcript %s: %w", p, err)
	}
	return f.Close()
}

func validInvocationID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
