// Package fakeprovider is a scripted model provider for tests: one TLS
// httptest server on 127.0.0.1 that speaks both the OpenAI Chat Completions
// (POST /v1/chat/completions) and the Anthropic Messages (POST /v1/messages)
// subsets, replays a per-test script of turns, and records every request.
// It also offers a socket that accepts and never answers. Only tests import
// it; it is never part of a shipped binary.
package fakeprovider

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Kind is what one scripted turn answers.
type Kind int

// The kinds of turn.
const (
	// Finish answers with one well-formed call of the finish tool.
	Finish Kind = iota
	// ToolCall answers with one well-formed call of Turn.Tool.
	ToolCall
	// Prose answers with text only, no tool call.
	Prose
	// Truncated stops for length (OpenAI "length", Anthropic "max_tokens")
	// inside a tool call.
	Truncated
	// BadToolArgs calls finish with arguments that are not valid JSON
	// (OpenAI) or not an object (Anthropic).
	BadToolArgs
	// UnknownTool calls a tool nobody offered.
	UnknownTool
	// RateLimited answers 429 with retry-after: 1 and the protocol's error body.
	RateLimited
	// Overloaded answers 529 (Anthropic's overloaded_error; OpenAI shape
	// for the other protocol).
	Overloaded
	// ServerError answers 500.
	ServerError
	// Malformed answers 200 with a body that is not JSON.
	Malformed
	// Oversized answers 200 with a JSON body of Turn.Size bytes.
	Oversized
	// Hang accepts the request and never answers until the client leaves.
	Hang
	// Raw answers Turn.Status (200 if 0) with Turn.Body exactly.
	Raw
)

// Turn is one scripted answer.
type Turn struct {
	Kind   Kind
	Tool   string         // ToolCall: the tool's name
	Args   map[string]any // Finish, ToolCall: the arguments
	Size   int            // Oversized: body size in bytes
	Status int            // Raw
	Body   string         // Raw
}

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server is the fake provider. Its zero value is not usable; call New.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex // guards the fields below
	script   []Turn
	requests []Request
	conns    int
	hang     chan struct{}
}

// New starts a fake provider that answers script in order; a request beyond
// the script gets a 500 and fails the test. It is closed at the end of t.
func New(t testing.TB, script ...Turn) *Server {
	t.Helper()
	s := &Server{script: script, hang: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.handle(t, w, r) }))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	// Handshake errors (a proxy refusing the fake's CA) are expected.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.StartTLS()
	t.Cleanup(func() {
		close(s.hang)
		s.srv.Close()
	})
	return s
}

// URL is the base URL (https://127.0.0.1:PORT).
func (s *Server) URL() string { return s.srv.URL }

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

// CertPool holds the server's CA, for the proxy's TestOnlyRootCAs.
func (s *Server) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(s.srv.Certificate())
	return p
}

// CertPEM is the server's CA certificate in PEM, for SSL_CERT_FILE.
func (s *Server) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Client is an HTTP client that trusts the server, for direct calls.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Push appends turns to the script.
func (s *Server) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, turns...)
}

// Requests returns a copy of every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count is the number of requests received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Conns is the number of connections the server accepted.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

func (s *Server) handle(t testing.TB, w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
	var turn Turn
	ok := len(s.script) > 0
	if ok {
		turn, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	if !ok {
		t.Errorf("fakeprovider: unscripted request %s %s", r.Method, r.URL.Path)
		http.Error(w, "unscripted", http.StatusInternalServerError)
		return
	}
	anthropic := r.URL.Path == "/v1/messages"
	if !anthropic && r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "unknown path", http.StatusNotFound)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)
	switch turn.Kind {
	case Hang:
		select {
		case <-r.Context().Done():
		case <-s.hang:
		}
		return
	case Raw:
		st := turn.Status
		if st == 0 {
			st = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		_, _ = io.WriteString(w, turn.Body)
		return
	case Malformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","choices":[{"message":`)
		return
	case Oversized:
		w.Header().Set("Content-Type", "application/json")
		pad := turn.Size - len(`{"pad":""}`)
		if pad < 0 {
			pad = 0
		}
		_, _ = io.WriteString(w, `{"pad":"`+strings.Repeat("x", pad)+`"}`)
		return
	case RateLimited:
		w.Header().Set("Retry-After", "1")
		writeError(w, anthropic, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded")
		return
	case Overloaded:
		writeError(w, anthropic, 529, "overloaded_error", "server_error")
		return
	case ServerError:
		writeError(w, anthropic, http.StatusInternalServerError, "api_error", "server_error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_fake")
	w.Header().Set("Set-Cookie", "provider-session=1")
	if anthropic {
		_ = json.NewEncoder(w).Encode(anthropicReply(turn, req.Model))
	} else {
		_ = json.NewEncoder(w).Encode(openAIReply(turn, req.Model))
	}
}

func writeError(w http.ResponseWriter, anthropic bool, status int, atype, otype string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if anthropic {
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":"fake"},"request_id":"req_fake"}`, atype)
		return
	}
	fmt.Fprintf(w, `{"error":{"message":"fake","type":%q,"param":null,"code":null}}`, otype)
}

// call returns the tool name and arguments a turn calls.
func call(turn Turn) (string, map[string]any) {
	switch turn.Kind {
	case ToolCall:
		return turn.Tool, turn.Args
	case UnknownTool:
		return "rm_rf", map[string]any{"path": "/"}
	}
	args := turn.Args
	if args == nil {
		args = map[string]any{"result": true}
	}
	return "finish", args
}

func openAIReply(turn Turn, model string) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "tool_calls"
	name, args := call(turn)
	a, _ := json.Marshal(args)
	argText := string(a)
	switch turn.Kind {
	case Prose:
		msg["content"], finish = "I think the answer is yes.", "stop"
	case Truncated:
		argText, finish = argText[:len(argText)/2], "length"
	case BadToolArgs:
		argText = `{"result": tru`
	}
	if turn.Kind != Prose {
		msg["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": name, "arguments": argText}}}
	}
	return map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
	}
}

func anthropicReply(turn Turn, model string) map[string]any {
	name, args := call(turn)
	stop := "tool_use"
	var content []any
	switch turn.Kind {
	case Prose:
		content, stop = []any{map[string]any{"type": "text", "text": "I think the answer is yes."}}, "end_turn"
	case BadToolArgs:
		content = []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": name, "input": "result=true"}}
	case Truncated:
		content, stop = []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": name, "input": map[string]any{}}}, "max_tokens"
	default:
		content = []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": name, "input": args}}
	}
	return map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 13, "output_tokens": 5},
	}
}

// Silent is a TCP listener on 127.0.0.1 that accepts connections and never
// reads or writes: a provider that hangs before TLS. It is closed at the end
// of t. It returns the base URL (https://ADDR) and the accept counter.
func Silent(t testing.TB) (string, func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakeprovider: %v", err)
	}
	var mu sync.Mutex
	var held []net.Conn
	n := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			n++
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return "https://" + l.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// OpenAIRequest is a minimal valid Chat Completions body for model.
func OpenAIRequest(model string, maxTokens int) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": model, "max_completion_tokens": maxTokens,
		"messages": []any{map[string]any{"role": "user", "content": "hello"}},
	})
	return b
}

// AnthropicRequest is a minimal valid Messages body for model.
func AnthropicRequest(model string, maxTokens int) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": model, "max_tokens": maxTokens,
		"messages": []any{map[string]any{"role": "user", "content": "hello"}},
	})
	return b
}

// Compact removes insignificant whitespace, for comparing bodies.
func Compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}
