package agentloop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/awf-project/awf/proto"
)

// Terminal states. Only StateOK writes a result; every other state is an
// explicit failure the broker reports as the canonical error.
const (
	StateOK             = "ok"
	StateTruncated      = "truncated"        // the output cap cut a reply
	StateNoToolCall     = "no_tool_call"     // a reply without the tool call it needed
	StateTokenBudget    = "token_budget"     // usage passed a token budget
	StateRequestBudget  = "request_budget"   // maxModelRequests spent without a result
	StateProviderError  = "provider_error"   // an error answer, a bad body, a transport failure
	StateDeadline       = "deadline"         // the wall-clock deadline came first
	StateResultTooLarge = "result_too_large" // the canonical result exceeds maxOutputBytes
	StateBadInput       = "bad_input"        // the task, schema, config or repository is unusable
	StateOutputError    = "output_error"     // the result file could not be written
)

// Loop constants.
const (
	// MaxResponseBytes caps one provider response body (the proxy's default
	// cap, so nothing the proxy passes is refused here).
	MaxResponseBytes = 1 << 20
	// maxToolCallsPerReply bounds the calls answered from one reply;
	// parallel calls are switched off, so more is a misbehaving provider.
	maxToolCallsPerReply = 8
	// maxArgumentBytes bounds one call's arguments (proto's strict parser).
	maxArgumentBytes = proto.MaxJSONBytes
	// requestTimeout bounds one HTTP exchange.
	requestTimeout = 60 * time.Second
	// stopMargin is kept before the deadline for writing the outputs.
	stopMargin = 200 * time.Millisecond
	// defaultRetryWait is the wait before the one retry when the provider
	// names none; maxRetryWait caps a provider's Retry-After.
	defaultRetryWait = 500 * time.Millisecond
	maxRetryWait     = 5 * time.Second
)

// The fixed prompts. They are the loop's, never the caller's.
const (
	systemPrompt = "You answer one question about a software repository. The repository is " +
		"read-only and reachable only through the tools list_files, read_file and search; " +
		"paths are relative to the repository root. Inspect the repository with these tools, " +
		"then call finish exactly once with the answer, which must match the finish tool's " +
		"schema. Reply only with tool calls, never with prose."
	recoveryInspect = "Reply only with tool calls. Inspect the repository with list_files, " +
		"read_file or search, then call finish with the answer."
	recoveryFinish = "Reply only with tool calls. Call finish now with your answer."
)

// Options is one invocation of the loop.
type Options struct {
	Config Config
	Task   string
	Schema *proto.Schema
	Repo   *Repo
	// Client sends the model requests. Nil means a client that never uses
	// an HTTP(S)_PROXY variable and never follows redirects.
	Client *http.Client
	// Transcript receives the bounded transcript; nil writes none.
	Transcript io.Writer
	// RetryWaitMax caps the wait before the one retry (0: maxRetryWait).
	// Tests shorten it.
	RetryWaitMax time.Duration
}

// Outcome is how an invocation ended.
type Outcome struct {
	State        string
	Detail       string // for the operator (transcript); never shown to the caller
	Result       []byte // canonical result JSON, StateOK only
	Requests     int
	InputTokens  int64
	OutputTokens int64
}

// DefaultClient is the loop's HTTP client: no proxy from the environment,
// no redirects, bounded connection setup.
func DefaultClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConns:          1,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: requestTimeout,
			DisableCompression:    true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// loop is the state of one invocation.
type loop struct {
	o        Options
	cfg      *Config
	p        profile
	tools    []toolDef
	tr       *transcript
	deadline time.Time
	url      string
	history  []json.RawMessage
	out      Outcome
	retried  bool
	repoUsed bool // a repository tool has been called with valid arguments
	recovery bool // the one recovery message has been sent
}

// Run runs the loop to a terminal state. It never panics on provider or
// model input; every failure is a state in the Outcome.
func Run(ctx context.Context, o Options) Outcome {
	l := &loop{o: o, cfg: &o.Config, tr: newTranscript(o.Transcript)}
	l.tr.secret = o.Config.Capability
	out := l.run(ctx)
	l.tr.end(out)
	return out
}

func (l *loop) fail(state, format string, args ...any) Outcome {
	l.out.State, l.out.Detail = state, fmt.Sprintf(format, args...)
	return l.out
}

func (l *loop) run(ctx context.Context) Outcome {
	if err := l.cfg.Validate(); err != nil {
		return l.fail(StateBadInput, "config: %v", err)
	}
	if l.o.Schema == nil || l.o.Repo == nil {
		return l.fail(StateBadInput, "no schema or repository")
	}
	p, _ := profileFor(l.cfg.Profile)
	l.p = p
	l.url = strings.TrimRight(l.cfg.Endpoint, "/") + p.path()
	l.deadline = time.UnixMilli(l.cfg.DeadlineUnixMilli).Add(-stopMargin)
	ctx, cancel := context.WithDeadline(ctx, l.deadline)
	defer cancel()
	if l.o.Client == nil {
		l.o.Client = DefaultClient()
	}
	finish, err := FinishParameters(l.o.Schema)
	if err != nil {
		return l.fail(StateBadInput, "schema: %v", err)
	}
	l.tools = repoTools(finish)
	schemaText := string(l.o.Schema.Compact())
	l.tr.add(map[string]any{"type": "task", "text": l.o.Task})
	l.tr.add(map[string]any{"type": "schema", "schema": schemaText})
	l.history = p.initial(systemPrompt, "Task:\n"+l.o.Task+"\n\nThe answer must match this finite schema:\n"+schemaText)

	choice := choiceAuto
	for l.out.Requests < l.cfg.MaxModelRequests {
		remaining := int64(l.cfg.MaxModelTokens) - l.out.OutputTokens
		if remaining <= 0 {
			return l.fail(StateTokenBudget, "the output token budget of %d is spent", l.cfg.MaxModelTokens)
		}
		if l.repoUsed && l.out.Requests == l.cfg.MaxModelRequests-1 {
			choice = choiceFinish // the last request can only be useful as finish
		}
		r, st, detail := l.exchange(ctx, choice, int(remaining))
		if st != "" {
			return l.fail(st, "%s", detail)
		}
		l.out.InputTokens += r.inTokens
		l.out.OutputTokens += r.outTokens
		if r.outTokens > remaining {
			return l.fail(StateTokenBudget, "the reply used %d output tokens; the request allowed %d", r.outTokens, remaining)
		}
		switch r.stop {
		case stopLength:
			return l.fail(StateTruncated, "the reply was cut by the output cap (%s)", r.reason)
		case stopOther:
			return l.fail(StateProviderError, "the reply stopped for %q", clipString(r.reason, 64))
		}
		l.history = append(l.history, r.assistant)
		if len(r.calls) == 0 {
			if r.stop == stopTools {
				return l.fail(StateNoToolCall, "the reply stopped for tool use but holds no tool call")
			}
			if l.recovery || choice == choiceFinish {
				return l.fail(StateNoToolCall, "a prose reply after the recovery message")
			}
			l.recovery = true
			msg, next := recoveryInspect, choiceAny
			if l.repoUsed {
				msg, next = recoveryFinish, choiceFinish
			}
			l.history = append(l.history, l.p.userText(msg))
			l.tr.add(map[string]any{"type": "recovery", "message": msg, "toolChoice": next.String()})
			choice = next
			continue
		}
		results, done := l.answer(ctx, r.calls)
		if done != nil {
			return *done
		}
		l.history = append(l.history, l.p.results(results)...)
		if choice == choiceAny {
			choice = choiceAuto
		}
	}
	return l.fail(StateRequestBudget, "%d model requests without a result", l.cfg.MaxModelRequests)
}

// answer runs the tool calls of one reply. A valid finish ends the loop
// (done is the outcome); everything else becomes a tool result.
func (l *loop) answer(ctx context.Context, calls []toolCall) ([]toolResult, *Outcome) {
	results := make([]toolResult, 0, len(calls))
	for i, c := range calls {
		if i >= maxToolCallsPerReply {
			results = append(results, toolResult{id: c.id, content: "error: too many tool calls in one reply", isError: true})
			continue
		}
		content, result, err := l.call(ctx, c)
		if err != nil && ctx.Err() != nil {
			o := l.fail(StateDeadline, "the deadline passed during a tool call")
			return nil, &o
		}
		tr := map[string]any{"type": "tool", "name": clipString(c.name, 64), "args": string(c.args)}
		if err != nil {
			content = "error: " + err.Error()
			tr["error"] = true
		}
		if content == "" {
			content = "(empty)" // some providers refuse an empty tool result
		}
		content = cutResult(content)
		tr["result"] = content
		if result != nil {
			tr["result"] = string(result)
		}
		l.tr.add(tr)
		if result != nil {
			if len(result) > l.cfg.MaxOutputBytes {
				o := l.fail(StateResultTooLarge, "the canonical result is %d bytes; the maximum is %d", len(result), l.cfg.MaxOutputBytes)
				return nil, &o
			}
			l.out.State, l.out.Result = StateOK, result
			return nil, &l.out
		}
		results = append(results, toolResult{id: c.id, content: content, isError: err != nil})
	}
	return results, nil
}

// call runs one tool call. For a valid finish it returns the canonical
// result; an error is the model's (or the repository's) and becomes an
// error tool result.
func (l *loop) call(ctx context.Context, c toolCall) (string, []byte, error) {
	switch c.name {
	case "list_files", "read_file", "search", "finish":
	default:
		return "", nil, toolErr("unknown tool %s; the tools are list_files, read_file, search and finish", strconv.Quote(clipString(c.name, 64)))
	}
	args, err := toolArgs(c)
	if err != nil {
		return "", nil, err
	}
	switch c.name {
	case "finish":
		v, err := args.only("result")
		if err != nil {
			return "", nil, err
		}
		if !l.repoUsed {
			return "", nil, toolErr("finish is refused until the repository has been inspected with list_files, read_file or search")
		}
		canon, err := l.o.Schema.AppendCanonical(nil, v[0])
		if err != nil {
			return "", nil, toolErr("the result does not match the schema: %v", err)
		}
		return "", canon, nil
	case "list_files":
		v, err := args.strings("path")
		if err != nil {
			return "", nil, err
		}
		l.repoUsed = true
		s, err := l.o.Repo.ListFiles(ctx, v[0])
		return s, nil, err
	case "read_file":
		v, err := args.strings("path")
		if err != nil {
			return "", nil, err
		}
		l.repoUsed = true
		s, err := l.o.Repo.ReadFile(ctx, v[0])
		return s, nil, err
	default: // search
		v, err := args.strings("pattern", "path?")
		if err != nil {
			return "", nil, err
		}
		l.repoUsed = true
		s, err := l.o.Repo.Search(ctx, v[0], v[1])
		return s, nil, err
	}
}

// exchange sends one model request (and at most one retry) and decodes the
// reply. A non-empty state ends the loop.
func (l *loop) exchange(ctx context.Context, choice choiceKind, maxTokens int) (reply, string, string) {
	body, err := l.p.request(l.cfg, l.history, l.tools, choice, maxTokens)
	if err != nil {
		return reply{}, StateBadInput, "build the request: " + err.Error()
	}
	for {
		if time.Now().After(l.deadline) {
			return reply{}, StateDeadline, "the deadline passed before the next request"
		}
		l.out.Requests++
		n := l.out.Requests
		l.tr.add(map[string]any{"type": "request", "n": n, "toolChoice": choice.String(), "maxTokens": maxTokens, "bytes": len(body)})
		status, header, resp, err := l.post(ctx, body)
		entry := map[string]any{"type": "response", "n": n}
		if err != nil {
			entry["error"] = err.Error()
		} else {
			entry["status"] = status
			entry["body"] = strings.ToValidUTF8(string(resp), "\uFFFD")
		}
		l.tr.add(entry)
		if err != nil && ctx.Err() != nil {
			return reply{}, StateDeadline, "the deadline passed during a request"
		}
		if err == nil && resp == nil {
			return reply{}, StateProviderError, fmt.Sprintf("status %d with a body over %d bytes", status, MaxResponseBytes)
		}
		retryable := err != nil || status == http.StatusTooManyRequests || status == 529 || status >= 500
		if err == nil && status == http.StatusOK {
			r, perr := l.p.parse(resp)
			if perr != nil {
				return reply{}, StateProviderError, "the response does not decode: " + perr.Error()
			}
			return r, "", ""
		}
		what := fmt.Sprintf("status %d", status)
		if err != nil {
			what = err.Error()
		}
		if !retryable {
			return reply{}, StateProviderError, "the provider answered " + what
		}
		if l.retried {
			return reply{}, StateProviderError, "the provider answered " + what + " again after the one retry"
		}
		if l.out.Requests >= l.cfg.MaxModelRequests {
			return reply{}, StateProviderError, "the provider answered " + what + " and no request is left for a retry"
		}
		wait := l.retryWait(header)
		if time.Now().Add(wait).After(l.deadline) {
			return reply{}, StateProviderError, "the provider answered " + what + " and a retry would pass the deadline"
		}
		l.retried = true
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return reply{}, StateDeadline, "the deadline passed while waiting to retry"
		case <-t.C:
		}
	}
}

// retryWait is the wait before the retry: the provider's Retry-After-Ms or
// Retry-After (seconds) if given, capped.
func (l *loop) retryWait(h http.Header) time.Duration {
	limit := maxRetryWait
	if l.o.RetryWaitMax > 0 {
		limit = l.o.RetryWaitMax
	}
	wait := defaultRetryWait
	if h != nil {
		if ms, err := strconv.ParseInt(h.Get("Retry-After-Ms"), 10, 64); err == nil && ms >= 0 {
			wait = time.Duration(min(ms, 1<<20)) * time.Millisecond
		} else if s, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64); err == nil && s >= 0 {
			wait = time.Duration(min(s, 1<<10)) * time.Second
		}
	}
	return min(wait, limit)
}

// post sends one request body and reads the response, at most
// MaxResponseBytes; a larger body is reported as a nil body.
func (l *loop) post(ctx context.Context, body []byte) (int, http.Header, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "awf-agent-loop")
	l.p.setHeaders(req.Header, l.cfg)
	resp, err := l.o.Client.Do(req)
	if err != nil {
		return 0, nil, nil, transportError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return 0, nil, nil, transportError(err)
	}
	if len(b) > MaxResponseBytes {
		// Not retryable: the same request would get the same answer.
		return resp.StatusCode, resp.Header, nil, nil
	}
	return resp.StatusCode, resp.Header, b, nil
}

// transportError describes a failed exchange without the request's URL
// (which is harmless, but the description should name the failure only).
func transportError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			err = inner
		}
	}
	return fmt.Errorf("transport: %v", err)
}

// repoTools are the four fixed tools.
func repoTools(finish []byte) []toolDef {
	path := `{"type":"string","description":"a path relative to the repository root; \".\" is the root"}`
	return []toolDef{
		{"list_files", fmt.Sprintf("List a directory of the repository: at most %d entries, sorted by name, each as \"dir PATH\", \"file PATH\" or \"other PATH\".", MaxListEntries),
			json.RawMessage(`{"type":"object","properties":{"path":` + path + `},"required":["path"],"additionalProperties":false}`)},
		{"read_file", fmt.Sprintf("Read the first %d bytes of a file of the repository.", MaxReadBytes),
			json.RawMessage(`{"type":"object","properties":{"path":` + path + `},"required":["path"],"additionalProperties":false}`)},
		{"search", fmt.Sprintf("Find files whose first %d bytes contain a literal substring (not a regular expression), below a directory (default the root); at most %d files, each with its first matching line as PATH:LINE: TEXT.", MaxReadBytes, MaxSearchHits),
			json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"pattern":{"type":"string","minLength":1,"maxLength":%d},"path":%s},"required":["pattern"],"additionalProperties":false}`, MaxPatternChars, path))},
		{"finish", "Give the final answer. Call it exactly once, after inspecting the repository; the result must match the schema.",
			json.RawMessage(finish)},
	}
}
