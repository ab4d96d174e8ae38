package agentloop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
	"github.com/awf-project/awf/tests/fakeprovider"
)

const (
	testCap     = "awf-cap-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testModel   = "test-model"
	testVersion = "2023-06-01"
	enumSchema  = `{"type":"enum","values":["net","store","api","none"]}`
)

// newSeed makes a small repository for the tools.
func newSeed(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"README.md":    "# demo\nThe retry policy lives in net.\n",
		"net/retry.go": "package net\n\n// Retry policy: exponential backoff.\nfunc Retry() {}\n",
		"store/db.go":  "package store\n",
		"api/api.go":   "package api\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

func testConfig(profile, endpoint string) Config {
	return Config{
		Profile: profile, Model: testModel, Endpoint: endpoint, Capability: testCap,
		MaxModelRequests: 8, MaxModelTokens: 1024, MaxOutputBytes: 8192,
		DeadlineUnixMilli: time.Now().Add(30 * time.Second).UnixMilli(), AnthropicVersion: testVersion,
	}
}

// run is one invocation against a scripted fake provider.
type run struct {
	out        Outcome
	fake       *fakeprovider.Server
	transcript []byte
}

// bodies decodes every request body the fake received.
func (r *run) bodies(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, q := range r.fake.Requests() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(q.Body, &m))
		out = append(out, m)
	}
	return out
}

// lines decodes the transcript.
func (r *run) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(r.transcript))
	sc.Buffer(nil, MaxTranscriptBytes)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "transcript line %q", sc.Text())
		out = append(out, m)
	}
	return out
}

func runLoop(t *testing.T, profile, schema string, script []fakeprovider.Turn, mod func(*Options)) *run {
	t.Helper()
	fake := fakeprovider.New(t, script...)
	s, err := proto.ParseSchema([]byte(schema))
	require.NoError(t, err)
	repo, err := OpenRepo(newSeed(t))
	require.NoError(t, err)
	t.Cleanup(func() { repo.Close() })
	var tr bytes.Buffer
	o := Options{Config: testConfig(profile, fake.URL()), Task: "Which subsystem owns the retry policy?",
		Schema: s, Repo: repo, Client: fake.Client(), Transcript: &tr, RetryWaitMax: 10 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := Run(ctx, o)
	return &run{out: out, fake: fake, transcript: tr.Bytes()}
}

var profiles = []string{ProfileOpenAI, ProfileAnthropic}

func list(path string) fakeprovider.Turn {
	return fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": path}}
}

func read(path string) fakeprovider.Turn {
	return fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "read_file", Args: map[string]any{"path": path}}
}

func finish(v any) fakeprovider.Turn {
	return fakeprovider.Turn{Kind: fakeprovider.Finish, Args: map[string]any{"result": v}}
}

func turn(k fakeprovider.Kind) fakeprovider.Turn { return fakeprovider.Turn{Kind: k} }

// toolChoice returns the normalised tool_choice of a request body.
func toolChoice(profile string, body map[string]any) string {
	tc := body["tool_choice"]
	if profile == ProfileOpenAI {
		if s, ok := tc.(string); ok {
			return map[string]string{"auto": "auto", "required": "any"}[s]
		}
		if m, ok := tc.(map[string]any); ok && m["type"] == "function" {
			if f, ok := m["function"].(map[string]any); ok && f["name"] == "finish" {
				return "finish"
			}
		}
		return "?"
	}
	m, ok := tc.(map[string]any)
	if !ok || m["disable_parallel_tool_use"] != true {
		return "?"
	}
	switch m["type"] {
	case "auto", "any":
		return m["type"].(string)
	case "tool":
		if m["name"] == "finish" {
			return "finish"
		}
	}
	return "?"
}

// TestLoopAnswers: the happy path, and what each request carries.
func TestLoopAnswers(t *testing.T) {
	for _, p := range profiles {
		t.Run(p, func(t *testing.T) {
			r := runLoop(t, p, enumSchema, []fakeprovider.Turn{list("."), read("net/retry.go"), finish("net")}, nil)
			require.Equal(t, StateOK, r.out.State, r.out.Detail)
			assert.Equal(t, `"net"`, string(r.out.Result))
			assert.Equal(t, 3, r.out.Requests)
			reqs := r.fake.Requests()
			require.Len(t, reqs, 3)
			for i, q := range reqs {
				assert.Equal(t, http.MethodPost, q.Method)
				assert.Equal(t, "application/json", q.Header.Get("Content-Type"))
				if p == ProfileOpenAI {
					assert.Equal(t, "/v1/chat/completions", q.Path)
					assert.Equal(t, "Bearer "+testCap, q.Header.Get("Authorization"))
					assert.Empty(t, q.Header.Get("x-api-key"))
				} else {
					assert.Equal(t, "/v1/messages", q.Path)
					assert.Equal(t, testCap, q.Header.Get("x-api-key"))
					assert.Equal(t, testVersion, q.Header.Get("anthropic-version"))
					assert.Empty(t, q.Header.Get("Authorization"))
				}
				b := r.bodies(t)[i]
				assert.Equal(t, testModel, b["model"])
				assert.NotContains(t, b, "stream")
				if p == ProfileOpenAI {
					assert.Equal(t, false, b["parallel_tool_calls"])
					assert.NotContains(t, b, "max_tokens")
					assert.Equal(t, float64(1024-7*i), b["max_completion_tokens"], "the per-request cap is the remaining budget")
				} else {
					assert.Equal(t, float64(1024-5*i), b["max_tokens"])
					assert.Contains(t, b["system"], "read-only")
				}
				assert.Equal(t, "auto", toolChoice(p, b))
				var names []string
				for _, tl := range b["tools"].([]any) {
					m := tl.(map[string]any)
					if p == ProfileOpenAI {
						assert.Equal(t, "function", m["type"])
						m = m["function"].(map[string]any)
					}
					names = append(names, m["name"].(string))
				}
				assert.Equal(t, []string{"list_files", "read_file", "search", "finish"}, names)
			}
			// The tool results went back to the model.
			assert.Contains(t, string(reqs[1].Body), `file README.md\n`)
			assert.Contains(t, string(reqs[1].Body), `dir net\n`)
			assert.Contains(t, string(reqs[2].Body), "Retry policy: exponential backoff.")
			assert.Contains(t, string(reqs[0].Body), "Which subsystem owns the retry policy?")
		})
	}
}

// TestLoopRules: every rule of the loop, for both profiles.
func TestLoopRules(t *testing.T) {
	usage := func(p string, in, out int) string {
		if p == ProfileOpenAI {
			return `"usage":{"prompt_tokens":` + strconv.Itoa(in) + `,"completion_tokens":` + strconv.Itoa(out) + `,"total_tokens":1}`
		}
		return `"usage":{"input_tokens":` + strconv.Itoa(in) + `,"output_tokens":` + strconv.Itoa(out) + `}`
	}
	noCalls := func(p string) string {
		if p == ProfileOpenAI {
			return `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"tool_calls"}],` + usage(p, 1, 1) + `}`
		}
		return `{"id":"x","type":"message","role":"assistant","content":[],"stop_reason":"tool_use",` + usage(p, 1, 1) + `}`
	}
	noUsage := func(p string) string {
		if p == ProfileOpenAI {
			return `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
		}
		return `{"id":"x","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`
	}
	greedy := func(p string) string { // a list_files call that claims 50 output tokens
		if p == ProfileOpenAI {
			return `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"list_files","arguments":"{\"path\":\".\"}"}}]},"finish_reason":"tool_calls"}],` + usage(p, 1, 50) + `}`
		}
		return `{"id":"x","type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"list_files","input":{"path":"."}}],"stop_reason":"tool_use",` + usage(p, 1, 50) + `}`
	}
	dupKey := func(p string) string {
		if p == ProfileOpenAI {
			return `{"choices":[],"choices":[]}`
		}
		return `{"type":"message","Type":"message"}`
	}
	raw := func(body string) fakeprovider.Turn { return fakeprovider.Turn{Kind: fakeprovider.Raw, Body: body} }
	type check func(t *testing.T, p string, r *run)
	inRequest := func(i int, s string) check {
		return func(t *testing.T, p string, r *run) {
			t.Helper()
			reqs := r.fake.Requests()
			require.Greater(t, len(reqs), i)
			assert.Contains(t, string(reqs[i].Body), s)
		}
	}
	choiceOf := func(i int, want string) check {
		return func(t *testing.T, p string, r *run) {
			t.Helper()
			b := r.bodies(t)
			require.Greater(t, len(b), i)
			assert.Equal(t, want, toolChoice(p, b[i]), "request %d", i)
		}
	}
	cases := []struct {
		name     string
		script   func(p string) []fakeprovider.Turn
		mod      func(*Options)
		state    string
		requests int
		result   string
		checks   []check
	}{
		{name: "finish before any repository tool is refused",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{finish("net"), list("."), finish("api")} },
			state:  StateOK, requests: 3, result: `"api"`,
			checks: []check{inRequest(1, "finish is refused until the repository has been inspected")}},
		{name: "prose gets one recovery message, then any tool is required",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{turn(fakeprovider.Prose), list("."), finish("store")}
			},
			state: StateOK, requests: 3, result: `"store"`,
			checks: []check{inRequest(1, recoveryInspect), choiceOf(0, "auto"), choiceOf(1, "any"), choiceOf(2, "auto")}},
		{name: "prose after a repository tool forces finish",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{list("."), turn(fakeprovider.Prose), finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`,
			checks: []check{inRequest(2, recoveryFinish), choiceOf(2, "finish")}},
		{name: "a second prose reply is a terminal state",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{turn(fakeprovider.Prose), turn(fakeprovider.Prose)}
			},
			state: StateNoToolCall, requests: 2},
		{name: "prose under a forced finish is a terminal state",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{list("."), turn(fakeprovider.Prose), turn(fakeprovider.Prose)}
			},
			state: StateNoToolCall, requests: 3},
		{name: "a tool-use stop without a tool call is a terminal state",
			script: func(p string) []fakeprovider.Turn { return []fakeprovider.Turn{raw(noCalls(p))} },
			state:  StateNoToolCall, requests: 1},
		{name: "truncation is a terminal state, even of a finish call",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{list("."), turn(fakeprovider.Truncated)} },
			state:  StateTruncated, requests: 2},
		{name: "truncation of the first reply",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{turn(fakeprovider.Truncated)} },
			state:  StateTruncated, requests: 1},
		{name: "an unknown tool gets an error result",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{turn(fakeprovider.UnknownTool), list("."), finish("none")}
			},
			state: StateOK, requests: 3, result: `"none"`,
			checks: []check{inRequest(1, `error: unknown tool \"rm_rf\"`)}},
		{name: "bad finish arguments get an error result",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{list("."), turn(fakeprovider.BadToolArgs), finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`,
			checks: []check{inRequest(2, "error: bad arguments")}},
		{name: "a wrong argument type gets an error result",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{{Kind: fakeprovider.ToolCall, Tool: "read_file", Args: map[string]any{"path": 7}}, list("."), finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`,
			checks: []check{inRequest(1, "path must be a string, not integer")}},
		{name: "an unknown argument gets an error result, and does not count as inspection",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": ".", "recursive": true}}, finish("net"), list("."), finish("net")}
			},
			state: StateOK, requests: 4, result: `"net"`,
			checks: []check{inRequest(1, `unknown argument \"recursive\"`), inRequest(2, "finish is refused")}},
		{name: "a missing argument gets an error result",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{{Kind: fakeprovider.ToolCall, Tool: "search", Args: map[string]any{"path": "."}}, list("."), finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`,
			checks: []check{inRequest(1, "pattern is required")}},
		{name: "a result outside the schema gets an error result",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{list("."), finish("retry"), finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`,
			checks: []check{inRequest(2, "the result does not match the schema")}},
		{name: "a finish with extra arguments gets an error result",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{list("."), {Kind: fakeprovider.Finish, Args: map[string]any{"result": "net", "why": "x"}}, finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`,
			checks: []check{inRequest(2, `unknown argument \"why\"`)}},
		{name: "a canonical result over maxOutputBytes is a terminal state",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{list("."), finish("store")} },
			mod:    func(o *Options) { o.Config.MaxOutputBytes = 6 },
			state:  StateResultTooLarge, requests: 2},
		{name: "the last request forces finish",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{list("."), list("net")} },
			mod:    func(o *Options) { o.Config.MaxModelRequests = 2 },
			state:  StateRequestBudget, requests: 2,
			checks: []check{choiceOf(0, "auto"), choiceOf(1, "finish")}},
		{name: "maxModelRequests bounds the requests",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{turn(fakeprovider.UnknownTool), turn(fakeprovider.UnknownTool), turn(fakeprovider.UnknownTool)}
			},
			mod:   func(o *Options) { o.Config.MaxModelRequests = 3 },
			state: StateRequestBudget, requests: 3},
		{name: "the total token budget from usage",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{list("."), list("net")} },
			mod: func(o *Options) {
				o.Config.MaxModelTokens = map[string]int{ProfileOpenAI: 12, ProfileAnthropic: 8}[o.Config.Profile]
			},
			state: StateTokenBudget, requests: 2},
		{name: "a spent token budget stops before the next request",
			script: func(p string) []fakeprovider.Turn { return []fakeprovider.Turn{list(".")} },
			mod: func(o *Options) {
				o.Config.MaxModelTokens = map[string]int{ProfileOpenAI: 7, ProfileAnthropic: 5}[o.Config.Profile]
			},
			state: StateTokenBudget, requests: 1},
		{name: "usage over the per-request cap is a terminal state",
			script: func(p string) []fakeprovider.Turn { return []fakeprovider.Turn{raw(greedy(p))} },
			mod:    func(o *Options) { o.Config.MaxModelTokens = 40 },
			state:  StateTokenBudget, requests: 1},
		{name: "a reply without usage is a provider error",
			script: func(p string) []fakeprovider.Turn { return []fakeprovider.Turn{raw(noUsage(p))} },
			state:  StateProviderError, requests: 1},
		{name: "one retry after 429",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{turn(fakeprovider.RateLimited), list("."), finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`},
		{name: "one retry after 529",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{list("."), turn(fakeprovider.Overloaded), finish("net")}
			},
			state: StateOK, requests: 3, result: `"net"`},
		{name: "one retry after 500, and no second one",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{turn(fakeprovider.ServerError), turn(fakeprovider.ServerError)}
			},
			state: StateProviderError, requests: 2},
		{name: "at most one retry per invocation",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{turn(fakeprovider.RateLimited), list("."), turn(fakeprovider.Overloaded)}
			},
			state: StateProviderError, requests: 3},
		{name: "a retry needs a request left",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{turn(fakeprovider.RateLimited)} },
			mod:    func(o *Options) { o.Config.MaxModelRequests = 1 },
			state:  StateProviderError, requests: 1},
		{name: "a 4xx is not retried",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{{Kind: fakeprovider.Raw, Status: 400, Body: `{"error":{"type":"invalid_request_error"}}`}}
			},
			state: StateProviderError, requests: 1},
		{name: "a 403 of the proxy is not retried",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{{Kind: fakeprovider.Raw, Status: 403, Body: `{"error":{"type":"max_model_requests_exceeded"}}`}}
			},
			state: StateProviderError, requests: 1},
		{name: "a malformed body is a provider error",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{turn(fakeprovider.Malformed)} },
			state:  StateProviderError, requests: 1},
		{name: "an oversized body is a provider error",
			script: func(string) []fakeprovider.Turn {
				return []fakeprovider.Turn{{Kind: fakeprovider.Oversized, Size: MaxResponseBytes + 1}}
			},
			state: StateProviderError, requests: 1},
		{name: "duplicate keys are a provider error",
			script: func(p string) []fakeprovider.Turn { return []fakeprovider.Turn{raw(dupKey(p))} },
			state:  StateProviderError, requests: 1},
		{name: "a provider that hangs ends at the deadline",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{turn(fakeprovider.Hang)} },
			mod: func(o *Options) {
				o.Config.DeadlineUnixMilli = time.Now().Add(700 * time.Millisecond).UnixMilli()
			},
			state: StateDeadline, requests: 1},
		{name: "a passed deadline sends nothing",
			script: func(string) []fakeprovider.Turn { return nil },
			mod:    func(o *Options) { o.Config.DeadlineUnixMilli = time.Now().Add(-time.Second).UnixMilli() },
			state:  StateDeadline, requests: 0},
		{name: "a retry that would pass the deadline is not made",
			script: func(string) []fakeprovider.Turn { return []fakeprovider.Turn{turn(fakeprovider.RateLimited)} },
			mod: func(o *Options) {
				o.RetryWaitMax = 5 * time.Second // Retry-After: 1 is honoured
				o.Config.DeadlineUnixMilli = time.Now().Add(900 * time.Millisecond).UnixMilli()
			},
			state: StateProviderError, requests: 1},
	}
	for _, p := range profiles {
		for _, c := range cases {
			t.Run(p+"/"+c.name, func(t *testing.T) {
				r := runLoop(t, p, enumSchema, c.script(p), c.mod)
				assert.Equal(t, c.state, r.out.State, r.out.Detail)
				assert.Equal(t, c.requests, r.out.Requests, "requests counted")
				assert.Equal(t, c.requests, r.fake.Count(), "requests received")
				if c.result != "" {
					assert.Equal(t, c.result, string(r.out.Result))
				} else {
					assert.Nil(t, r.out.Result)
				}
				for _, ch := range c.checks {
					ch(t, p, r)
				}
				lines := r.lines(t)
				require.NotEmpty(t, lines)
				assert.Equal(t, "end", lines[len(lines)-1]["type"])
				assert.Equal(t, c.state, lines[len(lines)-1]["state"], "the last transcript line names the terminal state")
			})
		}
	}
}

// TestLoopTransportRetry: a transport failure gets the one retry too.
func TestLoopTransportRetry(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens: connection refused
	for _, p := range profiles {
		t.Run(p, func(t *testing.T) {
			s, err := proto.ParseSchema([]byte(enumSchema))
			require.NoError(t, err)
			repo, err := OpenRepo(newSeed(t))
			require.NoError(t, err)
			defer repo.Close()
			var tr bytes.Buffer
			out := Run(context.Background(), Options{Config: testConfig(p, "http://"+addr), Task: "t", Schema: s,
				Repo: repo, Transcript: &tr, RetryWaitMax: time.Millisecond})
			assert.Equal(t, StateProviderError, out.State)
			assert.Equal(t, 2, out.Requests, "one retry")
			assert.Contains(t, out.Detail, "again after the one retry")
			assert.NotContains(t, tr.String(), testCap)
		})
	}
}

// TestLoopToolResultCut: every tool result is cut to MaxToolResultBytes.
func TestLoopToolResultCut(t *testing.T) {
	for _, p := range profiles {
		t.Run(p, func(t *testing.T) {
			fake := fakeprovider.New(t, list("."), finish("net"))
			dir := t.TempDir()
			for i := range 150 {
				name := strings.Repeat("x", 200) + strconv.Itoa(1000+i)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
			}
			repo, err := OpenRepo(dir)
			require.NoError(t, err)
			defer repo.Close()
			s, _ := proto.ParseSchema([]byte(enumSchema))
			var tr bytes.Buffer
			out := Run(context.Background(), Options{Config: testConfig(p, fake.URL()), Task: "t", Schema: s,
				Repo: repo, Client: fake.Client(), Transcript: &tr})
			require.Equal(t, StateOK, out.State, out.Detail)
			var content string
			var body map[string]any
			require.NoError(t, json.Unmarshal(fake.Requests()[1].Body, &body))
			msgs := body["messages"].([]any)
			last := msgs[len(msgs)-1].(map[string]any)
			if p == ProfileOpenAI {
				content = last["content"].(string)
			} else {
				content = last["content"].([]any)[0].(map[string]any)["content"].(string)
			}
			assert.Len(t, content, MaxToolResultBytes)
		})
	}
}

// TestTranscript: the transcript holds the task, the schema, the provider
// responses and the tool results, never a header or the capability, and
// ends with the terminal state.
func TestTranscript(t *testing.T) {
	for _, p := range profiles {
		t.Run(p, func(t *testing.T) {
			r := runLoop(t, p, enumSchema, []fakeprovider.Turn{read("README.md"), finish("net")}, nil)
			require.Equal(t, StateOK, r.out.State)
			text := string(r.transcript)
			assert.NotContains(t, text, testCap)
			assert.NotContains(t, strings.ToLower(text), "authorization")
			assert.NotContains(t, strings.ToLower(text), "x-api-key")
			assert.NotContains(t, strings.ToLower(text), "set-cookie", "no response header either")
			lines := r.lines(t)
			var types []string
			for _, l := range lines {
				types = append(types, l["type"].(string))
			}
			assert.Equal(t, []string{"task", "schema", "request", "response", "tool", "request", "response", "tool", "end"}, types)
			assert.Equal(t, "Which subsystem owns the retry policy?", lines[0]["text"])
			assert.Equal(t, enumSchema, lines[1]["schema"])
			assert.Contains(t, lines[3]["body"], "README.md")
			assert.Equal(t, float64(200), lines[3]["status"])
			assert.Equal(t, "read_file", lines[4]["name"])
			assert.Contains(t, lines[4]["result"], "The retry policy lives in net.")
			assert.Equal(t, "finish", lines[7]["name"])
			assert.Equal(t, "ok", lines[8]["state"])
			assert.Equal(t, float64(2), lines[8]["requests"])
		})
	}
}

// TestTranscriptBounded: the transcript stays under MaxTranscriptBytes and
// still ends with the terminal state.
func TestTranscriptBounded(t *testing.T) {
	var buf bytes.Buffer
	tr := newTranscript(&buf)
	big := strings.Repeat("y", 100<<10)
	for range 100 {
		tr.add(map[string]any{"type": "response", "body": big})
	}
	tr.end(Outcome{State: StateRequestBudget})
	assert.LessOrEqual(t, buf.Len(), MaxTranscriptBytes)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	assert.Equal(t, StateRequestBudget, last["state"])
	assert.Positive(t, last["droppedLines"])
	for _, l := range lines[:len(lines)-1] {
		assert.LessOrEqual(t, len(l), maxTranscriptString+200, "each string is cut")
	}
}

// TestLoopSchemaKinds: a result of each DSL kind goes through finish and is
// canonicalised by proto.
func TestLoopSchemaKinds(t *testing.T) {
	cases := []struct {
		name, schema string
		result       any
		canonical    string
	}{
		{"const", `{"type":"const","value":"x"}`, "x", `"x"`},
		{"boolean", `{"type":"boolean"}`, true, `true`},
		{"enum", `{"type":"enum","values":[1,2,3]}`, 2, `2`},
		{"integer", `{"type":"integer","minimum":-5,"maximum":5}`, -3, `-3`},
		{"object", `{"type":"object","fields":{"b":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":9}}}`,
			map[string]any{"n": 4, "b": false}, `{"b":false,"n":4}`},
		{"tuple", `{"type":"tuple","items":[{"type":"boolean"},{"type":"enum","values":["a","b"]}]}`, []any{true, "b"}, `[true,"b"]`},
		{"array", `{"type":"array","items":{"type":"boolean"},"length":3}`, []any{true, false, true}, `[true,false,true]`},
		{"union", `{"type":"union","variants":{"yes":{"type":"const","value":null},"count":{"type":"integer","minimum":0,"maximum":3}}}`,
			map[string]any{"value": 2, "tag": "count"}, `{"tag":"count","value":2}`},
	}
	for _, p := range profiles {
		for _, c := range cases {
			t.Run(p+"/"+c.name, func(t *testing.T) {
				r := runLoop(t, p, c.schema, []fakeprovider.Turn{list("."), finish(c.result)}, nil)
				require.Equal(t, StateOK, r.out.State, r.out.Detail)
				assert.Equal(t, c.canonical, string(r.out.Result))
				// The finish tool offers the compiled schema.
				var body map[string]any
				require.NoError(t, json.Unmarshal(r.fake.Requests()[0].Body, &body))
				tools := body["tools"].([]any)
				fin := tools[3].(map[string]any)
				var params any
				if p == ProfileOpenAI {
					params = fin["function"].(map[string]any)["parameters"]
				} else {
					params = fin["input_schema"]
				}
				assert.Equal(t, "object", params.(map[string]any)["type"])
				assert.Equal(t, []any{"result"}, params.(map[string]any)["required"])
			})
		}
	}
}

// TestLoopThroughProxy: the loop's requests pass the real API proxy's
// checks (model, stated output cap, no streaming, the capability header)
// for both protocols, end to end to the fake provider.
func TestLoopThroughProxy(t *testing.T) {
	for _, p := range profiles {
		t.Run(p, func(t *testing.T) {
			fake := fakeprovider.New(t, list("."), read("net/retry.go"), finish("net"))
			px, tok := startProxy(t, fake, 1024, 8)
			dir := t.TempDir()
			paths := Paths{Repo: newSeed(t), Task: filepath.Join(dir, "task"), Schema: filepath.Join(dir, "schema.json"),
				Config: filepath.Join(dir, "loop.json"), Result: filepath.Join(dir, "result.json"),
				Transcript: filepath.Join(dir, "transcript.jsonl")}
			cfg := testConfig(p, px)
			cfg.Capability = tok
			cb, err := json.Marshal(cfg)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(paths.Config, cb, 0o644))
			require.NoError(t, os.WriteFile(paths.Task, []byte("Which subsystem owns the retry policy?"), 0o644))
			require.NoError(t, os.WriteFile(paths.Schema, []byte(enumSchema), 0o644))
			code := Main(context.Background(), paths)
			tr, _ := os.ReadFile(paths.Transcript)
			require.Equal(t, ExitOK, code, string(tr))
			res, err := os.ReadFile(paths.Result)
			require.NoError(t, err)
			assert.Equal(t, `"net"`, string(res))
			assert.Equal(t, 3, fake.Count())
			assert.NotContains(t, string(tr), tok)
			for _, q := range fake.Requests() {
				assert.NotContains(t, q.Header.Get("Authorization")+q.Header.Get("x-api-key"), tok, "the capability never reaches the provider")
			}
		})
	}
}

// TestLoopProxyCaps: the proxy's own per-capability request cap ends the
// loop as a provider error (403 is never retried).
func TestLoopProxyCaps(t *testing.T) {
	for _, p := range profiles {
		t.Run(p, func(t *testing.T) {
			fake := fakeprovider.New(t, list("."))
			px, tok := startProxy(t, fake, 1024, 1)
			s, _ := proto.ParseSchema([]byte(enumSchema))
			repo, err := OpenRepo(newSeed(t))
			require.NoError(t, err)
			defer repo.Close()
			cfg := testConfig(p, px)
			cfg.Capability = tok
			out := Run(context.Background(), Options{Config: cfg, Task: "t", Schema: s, Repo: repo})
			assert.Equal(t, StateProviderError, out.State)
			assert.Contains(t, out.Detail, "status 403")
			assert.Equal(t, 2, out.Requests)
			assert.Equal(t, 1, fake.Count())
		})
	}
}

// TestMainBadInput: Main refuses unusable inputs before any request and
// says why in the transcript; it writes no result.
func TestMainBadInput(t *testing.T) {
	good, _ := json.Marshal(testConfig(ProfileOpenAI, "http://127.0.0.1:9"))
	cases := []struct {
		name                 string
		config, task, schema string
		detail               string
	}{
		{"unknown config key", `{"profile":"openai","extra":1}`, "t", enumSchema, "unknown key"},
		{"empty task", string(good), "", enumSchema, "empty"},
		{"task not UTF-8", string(good), "\xff", enumSchema, "UTF-8"},
		{"bad schema", string(good), "t", `{"type":"string"}`, "invalid schema"},
		{"config not JSON", `{`, "t", enumSchema, "loop config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			paths := Paths{Repo: newSeed(t), Task: filepath.Join(dir, "task"), Schema: filepath.Join(dir, "schema.json"),
				Config: filepath.Join(dir, "loop.json"), Result: filepath.Join(dir, "result.json"),
				Transcript: filepath.Join(dir, "transcript.jsonl")}
			require.NoError(t, os.WriteFile(paths.Config, []byte(c.config), 0o644))
			require.NoError(t, os.WriteFile(paths.Task, []byte(c.task), 0o644))
			require.NoError(t, os.WriteFile(paths.Schema, []byte(c.schema), 0o644))
			assert.Equal(t, ExitBadInput, Main(context.Background(), paths))
			assert.NoFileExists(t, paths.Result)
			tr, err := os.ReadFile(paths.Transcript)
			require.NoError(t, err)
			assert.Contains(t, string(tr), `"state":"bad_input"`)
			assert.Contains(t, string(tr), c.detail)
		})
	}
}

// TestLoopManyCalls: a reply with more calls than the loop answers gets an
// error result for each extra one; the calls it answers run in order, and
// a valid finish among them ends the loop. Forced-function replies that
// say "stop" (as OpenAI's do) still have their calls run.
func TestLoopManyCalls(t *testing.T) {
	many := func(p string, n int, last string) string {
		var calls []string
		for i := range n {
			id := "c" + strconv.Itoa(i)
			if p == ProfileOpenAI {
				calls = append(calls, `{"id":"`+id+`","type":"function","function":{"name":"list_files","arguments":"{\"path\":\".\"}"}}`)
			} else {
				calls = append(calls, `{"type":"tool_use","id":"`+id+`","name":"list_files","input":{"path":"."}}`)
			}
		}
		if last != "" {
			calls = append(calls, last)
		}
		if p == ProfileOpenAI {
			return `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") +
				`]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
		}
		return `{"type":"message","role":"assistant","content":[` + strings.Join(calls, ",") +
			`],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`
	}
	finishCall := map[string]string{
		ProfileOpenAI:    `{"id":"f","type":"function","function":{"name":"finish","arguments":"{\"result\":\"api\"}"}}`,
		ProfileAnthropic: `{"type":"tool_use","id":"f","name":"finish","input":{"result":"api"}}`,
	}
	for _, p := range profiles {
		t.Run(p, func(t *testing.T) {
			r := runLoop(t, p, enumSchema, []fakeprovider.Turn{
				{Kind: fakeprovider.Raw, Body: many(p, 10, "")},
				{Kind: fakeprovider.Raw, Body: many(p, 1, finishCall[p])},
			}, nil)
			require.Equal(t, StateOK, r.out.State, r.out.Detail)
			assert.Equal(t, `"api"`, string(r.out.Result))
			second := string(r.fake.Requests()[1].Body)
			assert.Equal(t, 2, strings.Count(second, "too many tool calls in one reply"))
			assert.Equal(t, maxToolCallsPerReply, strings.Count(second, `dir net\n`))
		})
	}
}
