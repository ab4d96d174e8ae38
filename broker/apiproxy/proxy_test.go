package apiproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fakeprovider"
	"github.com/awf-project/awf/tests/fixture"
)

const (
	openAIKey    = "sk-real-openai-key-0123456789"
	anthropicKey = "sk-ant-real-anthropic-key-0123456789"
	openAIModel  = "gpt-4o-mini"
	claudeModel  = "claude-sonnet-4-5"
)

// auditEntries decodes the audit lines the proxy wrote so far, each
// strictly: an unknown field fails the test.
func auditEntries(t *testing.T, audit *fixture.SyncBuffer) []Entry {
	t.Helper()
	var out []Entry
	for _, l := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		if l == "" {
			continue
		}
		var e Entry
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&e), l)
		out = append(out, e)
	}
	return out
}

// rig is a proxy in front of a fake provider, served on 127.0.0.1.
type rig struct {
	fake  *fakeprovider.Server
	proxy *Proxy
	srv   *httptest.Server
	audit *fixture.SyncBuffer
}

func defaultLimits() Limits {
	return Limits{
		Models:      map[Protocol]string{OpenAI: openAIModel, Anthropic: claudeModel},
		MaxRequests: 8, MaxTokens: 1024,
		MaxRequestBytes: 64 << 10, MaxResponseBytes: 64 << 10,
		Timeout: 5 * time.Second,
	}
}

func newRig(t *testing.T, script ...fakeprovider.Turn) *rig {
	t.Helper()
	fake := fakeprovider.New(t, script...)
	return newRigFor(t, fake, fake.URL())
}

func newRigFor(t *testing.T, fake *fakeprovider.Server, base string) *rig {
	t.Helper()
	audit := &fixture.SyncBuffer{}
	p, err := New(Options{
		Targets: []Target{
			{Protocol: OpenAI, BaseURL: base, Key: openAIKey},
			{Protocol: Anthropic, BaseURL: base, Key: anthropicKey},
		},
		Audit:           audit,
		TestOnlyRootCAs: fake.CertPool(),
	})
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.Close() })
	return &rig{fake: fake, proxy: p, srv: srv, audit: audit}
}

func (r *rig) issue(t *testing.T, l Limits) string {
	t.Helper()
	tok, err := r.proxy.Issue(CallerAgent, l)
	require.NoError(t, err)
	return tok
}

// protocolCase is one protocol's way of calling the proxy.
type protocolCase struct {
	proto Protocol
	model string
	body  func(model string, maxTokens int) []byte
	auth  func(h http.Header, tok string)
}

func protocols() []protocolCase {
	return []protocolCase{
		{OpenAI, openAIModel, fakeprovider.OpenAIRequest, func(h http.Header, tok string) { h.Set("Authorization", "Bearer "+tok) }},
		{Anthropic, claudeModel, fakeprovider.AnthropicRequest, func(h http.Header, tok string) { h.Set("X-Api-Key", tok) }},
	}
}

func (r *rig) do(t *testing.T, method, path string, h http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := r.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// errorCode reads the refusal code from either protocol's error shape.
func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(b, &v), string(b))
	return v.Error.Type
}

func TestProxyStripsClientHeadersAndInjectsCredential(t *testing.T) {
	for _, pc := range protocols() {
		t.Run(string(pc.proto), func(t *testing.T) {
			r := newRig(t, fakeprovider.Turn{Kind: fakeprovider.Finish})
			tok := r.issue(t, defaultLimits())
			h := http.Header{}
			pc.auth(h, tok)
			h.Set("Proxy-Authorization", "Basic c2VjcmV0")
			h.Set("Forwarded", "for=10.0.0.1")
			h.Set("Via", "1.1 evil")
			h.Set("X-Forwarded-For", "10.0.0.2")
			h.Set("X-Forwarded-Host", "evil.example")
			h.Set("X-Forwarded-Proto", "http")
			h.Set("Anthropic-Version", "2099-01-01")
			h.Set("Anthropic-Beta", "some-beta")
			h.Set("Cookie", "session=1")
			h.Set("X-Custom-Signal", "1")
			req, err := http.NewRequest(http.MethodPost, r.srv.URL+pc.proto.Path(), bytes.NewReader(pc.body(pc.model, 100)))
			require.NoError(t, err)
			req.Header = h
			req.Host = "evil.example"
			resp, err := r.srv.Client().Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

			got := r.fake.Requests()
			require.Len(t, got, 1)
			up := got[0]
			assert.Equal(t, http.MethodPost, up.Method)
			assert.Equal(t, pc.proto.Path(), up.Path, "the fixed path, no query")
			assert.Equal(t, pc.body(pc.model, 100), up.Body, "the body is forwarded byte for byte")
			switch pc.proto {
			case OpenAI:
				assert.Equal(t, []string{"Bearer " + openAIKey}, up.Header.Values("Authorization"))
				assert.Empty(t, up.Header.Values("X-Api-Key"))
				assert.Empty(t, up.Header.Values("Anthropic-Version"))
			case Anthropic:
				assert.Equal(t, []string{anthropicKey}, up.Header.Values("X-Api-Key"))
				assert.Equal(t, []string{AnthropicVersion}, up.Header.Values("Anthropic-Version"), "pinned, whatever the caller sent")
				assert.Empty(t, up.Header.Values("Authorization"))
			}
			for _, k := range []string{"Proxy-Authorization", "Forwarded", "Via", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Anthropic-Beta", "Cookie", "X-Custom-Signal"} {
				assert.Empty(t, up.Header.Values(k), "%s reached the provider", k)
			}
			for k, vs := range up.Header {
				for _, v := range vs {
					assert.NotContains(t, v, tok, "the capability reached the provider in %s", k)
					assert.NotContains(t, v, "evil", "a client value reached the provider in %s", k)
				}
			}
			// What the provider sees is exactly this header set (Go adds
			// Content-Length and Accept-Encoding is disabled).
			var names []string
			for k := range up.Header {
				names = append(names, k)
			}
			want := []string{"Accept", "Content-Length", "Content-Type", "User-Agent", "Authorization"}
			if pc.proto == Anthropic {
				want = []string{"Accept", "Content-Length", "Content-Type", "User-Agent", "X-Api-Key", "Anthropic-Version"}
			}
			assert.ElementsMatch(t, want, names)

			assert.Equal(t, []string{r.fake.Addr()}, r.proxy.Dials(), "one dial, to the fake provider only")
			assert.Equal(t, 1, r.fake.Conns())
			assert.Empty(t, resp.Header.Values("Set-Cookie"), "provider headers outside the allowlist are dropped")
			assert.Equal(t, "req_fake", resp.Header.Get("X-Request-Id"))
			assert.NotEmpty(t, resp.Header.Get("X-Awf-Request-Id"))
			assert.NotContains(t, string(body), openAIKey)
			assert.NotContains(t, string(body), anthropicKey)
		})
	}
}

func TestProxyCapabilityRefusals(t *testing.T) {
	for _, pc := range protocols() {
		t.Run(string(pc.proto), func(t *testing.T) {
			r := newRig(t)
			tok := r.issue(t, defaultLimits())
			other := r.issue(t, defaultLimits())
			require.NotEqual(t, tok, other)
			require.True(t, strings.HasPrefix(tok, capabilityPrefix))
			require.Len(t, tok, len(capabilityPrefix)+64, "256 bits in hex")
			revoked := r.issue(t, defaultLimits())
			require.True(t, r.proxy.Revoke(revoked))
			require.False(t, r.proxy.Revoke("awf-cap-never-issued"))
			cases := []struct {
				name string
				hdr  http.Header
				code string
			}{
				{"missing", http.Header{}, CodeCapabilityMissing},
				{"wrong", http.Header{"Authorization": {"Bearer awf-cap-" + strings.Repeat("0", 64)}}, CodeCapabilityInvalid},
				{"wrong x-api-key", http.Header{"X-Api-Key": {tok[:len(tok)-1] + "x"}}, CodeCapabilityInvalid},
				{"real key", http.Header{"Authorization": {"Bearer " + openAIKey}}, CodeCapabilityInvalid},
				{"basic", http.Header{"Authorization": {"Basic " + tok}}, CodeCapabilityInvalid},
				{"two headers disagree", http.Header{"Authorization": {"Bearer " + tok}, "X-Api-Key": {other}}, CodeCapabilityInvalid},
				{"twice", http.Header{"Authorization": {"Bearer " + tok, "Bearer " + tok}}, CodeCapabilityInvalid},
				{"revoked", http.Header{"Authorization": {"Bearer " + revoked}}, CodeCapabilityRevoked},
				{"revoked x-api-key", http.Header{"X-Api-Key": {revoked}}, CodeCapabilityRevoked},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp, b := r.do(t, http.MethodPost, pc.proto.Path(), tc.hdr, pc.body(pc.model, 10))
					assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
					assert.Equal(t, tc.code, errorCode(t, b))
					assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				})
			}
			assert.Zero(t, r.fake.Count(), "no unauthenticated request reached the provider")
			assert.Empty(t, r.proxy.Dials(), "nothing was even dialled")
			ents := auditEntries(t, r.audit)
			require.Len(t, ents, len(cases), "every refusal is counted in the audit log")
			for i, e := range ents {
				assert.Equal(t, CallerUnauthenticated, e.Caller)
				assert.Equal(t, cases[i].code, e.Outcome)
				assert.Equal(t, http.StatusUnauthorized, e.Status)
			}
		})
	}
}

func TestProxyLimits(t *testing.T) {
	for _, pc := range protocols() {
		t.Run(string(pc.proto), func(t *testing.T) {
			r := newRig(t)
			l := defaultLimits()
			l.MaxRequestBytes = 4096
			tok := r.issue(t, l)
			h := http.Header{}
			pc.auth(h, tok)
			good := string(pc.body(pc.model, 10))
			tokensKey := `"max_tokens":10`
			if pc.proto == OpenAI {
				tokensKey = `"max_completion_tokens":10`
			}
			with := func(old, new string) []byte {
				require.Contains(t, good, old)
				return []byte(strings.Replace(good, old, new, 1))
			}
			type refusal struct {
				name   string
				method string
				path   string
				body   []byte
				status int
				code   string
			}
			cases := []refusal{
				{"unknown path", "POST", "/v1/completions", []byte(good), 404, CodeUnknownPath},
				{"models list", "GET", "/v1/models", nil, 404, CodeUnknownPath},
				{"path with dot dot", "POST", "/v1/../v1/messages/x", []byte(good), 404, CodeUnknownPath},
				{"wrong method", "GET", pc.proto.Path(), nil, 405, CodeMethodNotAllowed},
				{"put", "PUT", pc.proto.Path(), []byte(good), 405, CodeMethodNotAllowed},
				{"query", "POST", pc.proto.Path() + "?beta=true", []byte(good), 400, CodeQueryNotAllowed},
				{"other model", "POST", pc.proto.Path(), with(`"model":"`+pc.model+`"`, `"model":"gpt-5-pro"`), 403, CodeModelNotAllowed},
				{"model prefix", "POST", pc.proto.Path(), with(`"model":"`+pc.model+`"`, `"model":"`+pc.model+`-2"`), 403, CodeModelNotAllowed},
				{"no model", "POST", pc.proto.Path(), with(`,"model":"`+pc.model+`"`, ``), 403, CodeModelNotAllowed},
				{"model not a string", "POST", pc.proto.Path(), with(`"model":"`+pc.model+`"`, `"model":["`+pc.model+`"]`), 403, CodeModelNotAllowed},
				{"duplicate model", "POST", pc.proto.Path(), with(`"model":"`+pc.model+`"`, `"model":"`+pc.model+`","model":"gpt-5-pro"`), 400, CodeInvalidJSON},
				{"case-folded model", "POST", pc.proto.Path(), with(`"model":"`+pc.model+`"`, `"model":"`+pc.model+`","Model":"gpt-5-pro"`), 400, CodeInvalidJSON},
				{"kelvin-folded key", "POST", pc.proto.Path(), with(`"model":"`+pc.model+`"`, `"model":"`+pc.model+`","stream":false,"\u017Ftream":true`), 400, CodeInvalidJSON},
				{"nested duplicate", "POST", pc.proto.Path(), with(`"role":"user"`, `"role":"user","role":"system"`), 400, CodeInvalidJSON},
				{"stream", "POST", pc.proto.Path(), with(tokensKey, tokensKey+`,"stream":true`), 403, CodeStreamNotAllowed},
				{"stream string", "POST", pc.proto.Path(), with(tokensKey, tokensKey+`,"stream":"false"`), 403, CodeStreamNotAllowed},
				{"no max tokens", "POST", pc.proto.Path(), with(tokensKey+`,`, ``), 400, CodeMaxTokensRequired},
				{"over cap", "POST", pc.proto.Path(), with(tokensKey, strings.Replace(tokensKey, "10", "1025", 1)), 403, CodeMaxTokensExceeded},
				{"huge", "POST", pc.proto.Path(), with(tokensKey, strings.Replace(tokensKey, "10", "99999999999999999999", 1)), 400, CodeInvalidField},
				{"fraction", "POST", pc.proto.Path(), with(tokensKey, strings.Replace(tokensKey, "10", "10.0", 1)), 400, CodeInvalidField},
				{"exponent", "POST", pc.proto.Path(), with(tokensKey, strings.Replace(tokensKey, "10", "1e1", 1)), 400, CodeInvalidField},
				{"zero", "POST", pc.proto.Path(), with(tokensKey, strings.Replace(tokensKey, "10", "0", 1)), 400, CodeInvalidField},
				{"string tokens", "POST", pc.proto.Path(), with(tokensKey, strings.Replace(tokensKey, "10", `"10"`, 1)), 400, CodeInvalidField},
				{"not json", "POST", pc.proto.Path(), []byte("model=x"), 400, CodeInvalidJSON},
				{"array", "POST", pc.proto.Path(), []byte("[" + good + "]"), 400, CodeInvalidJSON},
				{"trailing", "POST", pc.proto.Path(), []byte(good + good), 400, CodeInvalidJSON},
				{"bad utf8", "POST", pc.proto.Path(), with(`"hello"`, "\"hel\xfflo\""), 400, CodeInvalidJSON},
				{"too deep", "POST", pc.proto.Path(), with(`"hello"`, strings.Repeat("[", 200)+strings.Repeat("]", 200)), 400, CodeInvalidJSON},
				{"oversized body", "POST", pc.proto.Path(), with(`"hello"`, `"`+strings.Repeat("a", 5000)+`"`), 413, CodeRequestTooLarge},
			}
			if pc.proto == OpenAI {
				cases = append(cases,
					refusal{"n=2", "POST", pc.proto.Path(), with(tokensKey, tokensKey+`,"n":2`), 403, CodeChoicesNotAllowed},
					refusal{"legacy max_tokens over cap", "POST", pc.proto.Path(), with(tokensKey, tokensKey+`,"max_tokens":2000`), 403, CodeMaxTokensExceeded},
				)
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp, b := r.do(t, tc.method, tc.path, h, tc.body)
					assert.Equal(t, tc.status, resp.StatusCode, string(b))
					assert.Equal(t, tc.code, errorCode(t, b))
				})
			}
			assert.Zero(t, r.fake.Count(), "no refused request reached the provider")
			// The refusals charged nothing: the capability still has all of its requests.
			r.fake.Push(fakeprovider.Turn{Kind: fakeprovider.Finish})
			resp, b := r.do(t, http.MethodPost, pc.proto.Path(), h, []byte(good))
			assert.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			if pc.proto == OpenAI {
				// The deprecated max_tokens alone is a stated cap too.
				r.fake.Push(fakeprovider.Turn{Kind: fakeprovider.Finish})
				resp, b = r.do(t, http.MethodPost, pc.proto.Path(), h, with(tokensKey, `"max_tokens":10`))
				assert.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			}
			for _, e := range auditEntries(t, r.audit) {
				assert.Equal(t, CallerAgent, e.Caller)
			}
		})
	}
}

func TestProxyTargetAndModelPerCapability(t *testing.T) {
	r := newRig(t)
	l := defaultLimits()
	l.Models = map[Protocol]string{Anthropic: claudeModel}
	tok := r.issue(t, l)
	resp, b := r.do(t, http.MethodPost, OpenAI.Path(), http.Header{"Authorization": {"Bearer " + tok}}, fakeprovider.OpenAIRequest(openAIModel, 10))
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, CodeTargetUnconfigured, errorCode(t, b))
	assert.Zero(t, r.fake.Count())

	_, err := r.proxy.Issue("inv-1", Limits{})
	assert.Error(t, err, "zero limits are refused, not unlimited")
	_, err = r.proxy.Issue("bad caller!", defaultLimits())
	assert.Error(t, err)
}

func TestProxyRequestCapIs403(t *testing.T) {
	for _, pc := range protocols() {
		t.Run(string(pc.proto), func(t *testing.T) {
			r := newRig(t, fakeprovider.Turn{Kind: fakeprovider.ToolCall, Tool: "list_files", Args: map[string]any{"path": "."}},
				fakeprovider.Turn{Kind: fakeprovider.RateLimited})
			l := defaultLimits()
			l.MaxRequests = 2
			tok := r.issue(t, l)
			second := r.issue(t, l)
			h := http.Header{}
			pc.auth(h, tok)
			resp, _ := r.do(t, http.MethodPost, pc.proto.Path(), h, pc.body(pc.model, 10))
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			resp, _ = r.do(t, http.MethodPost, pc.proto.Path(), h, pc.body(pc.model, 10))
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a provider 429 passes through")
			assert.Equal(t, "1", resp.Header.Get("Retry-After"))
			// The 429 was charged: the cap is spent, and the proxy says so with 403.
			resp, b := r.do(t, http.MethodPost, pc.proto.Path(), h, pc.body(pc.model, 10))
			assert.Equal(t, http.StatusForbidden, resp.StatusCode)
			assert.Equal(t, CodeRequestsExhausted, errorCode(t, b))
			assert.Empty(t, resp.Header.Get("Retry-After"))
			assert.Equal(t, 2, r.fake.Count())
			// Another capability has its own count.
			r.fake.Push(fakeprovider.Turn{Kind: fakeprovider.Finish})
			h2 := http.Header{}
			pc.auth(h2, second)
			resp, _ = r.do(t, http.MethodPost, pc.proto.Path(), h2, pc.body(pc.model, 10))
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			// Revoked mid-run: refused.
			r.proxy.Revoke(second)
			resp, b = r.do(t, http.MethodPost, pc.proto.Path(), h2, pc.body(pc.model, 10))
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			assert.Equal(t, CodeCapabilityRevoked, errorCode(t, b))
			assert.Equal(t, 3, r.fake.Count())
		})
	}
}

// TestProxyCapabilitiesShareNoUpstreamConnection is the receiving end of a
// channel through the proxy's connection pool: were it shared, the primary
// agent's next request would reuse the connection an enclave's requests left
// open, and its latency would say whether (and, with HTTP/2's one connection,
// how busily) the enclave talked to the provider. Each capability reuses only
// its own connections, and a revoked one's are closed.
func TestProxyCapabilitiesShareNoUpstreamConnection(t *testing.T) {
	var turns []fakeprovider.Turn
	for i := 0; i < 6; i++ {
		turns = append(turns, fakeprovider.Turn{Kind: fakeprovider.Finish})
	}
	r := newRig(t, turns...)
	agent := r.issue(t, defaultLimits())
	enclave, err := r.proxy.Issue("enclave-1", defaultLimits())
	require.NoError(t, err)
	call := func(tok string) {
		t.Helper()
		resp, b := r.do(t, http.MethodPost, OpenAI.Path(), http.Header{"Authorization": {"Bearer " + tok}}, fakeprovider.OpenAIRequest(openAIModel, 10))
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
	for _, step := range []struct {
		who   string
		tok   string
		conns int
	}{
		{"agent", agent, 1},
		{"agent again: its own idle connection", agent, 1},
		{"enclave: a connection of its own", enclave, 2},
		{"enclave again", enclave, 2},
		{"agent after the enclave: still its own", agent, 2},
	} {
		call(step.tok)
		assert.Equal(t, step.conns, r.fake.Conns(), step.who)
	}
	require.True(t, r.proxy.Revoke(enclave))
	second, err := r.proxy.Issue("enclave-2", defaultLimits())
	require.NoError(t, err)
	call(second)
	assert.Equal(t, 3, r.fake.Conns(), "the next enclave dials anew")
	assert.Equal(t, []string{r.fake.Addr(), r.fake.Addr(), r.fake.Addr()}, r.proxy.Dials(), "every dial to the fake provider only")
}

func TestProxyConcurrentRequestsNeverExceedCap(t *testing.T) {
	var turns []fakeprovider.Turn
	for i := 0; i < 5; i++ {
		turns = append(turns, fakeprovider.Turn{Kind: fakeprovider.Finish})
	}
	r := newRig(t, turns...)
	l := defaultLimits()
	l.MaxRequests = 5
	tok := r.issue(t, l)
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := r.do(t, http.MethodPost, OpenAI.Path(), http.Header{"Authorization": {"Bearer " + tok}}, fakeprovider.OpenAIRequest(openAIModel, 10))
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	assert.Equal(t, map[int]int{200: 5, 403: 15}, n)
	assert.Equal(t, 5, r.fake.Count())
}

func TestProxyScriptedTurnsPassVerbatim(t *testing.T) {
	kinds := []fakeprovider.Kind{fakeprovider.Finish, fakeprovider.Prose, fakeprovider.Truncated,
		fakeprovider.BadToolArgs, fakeprovider.UnknownTool}
	for _, pc := range protocols() {
		t.Run(string(pc.proto), func(t *testing.T) {
			var script []fakeprovider.Turn
			for _, k := range kinds {
				script = append(script, fakeprovider.Turn{Kind: k})
			}
			r := newRig(t, script...)
			tok := r.issue(t, defaultLimits())
			h := http.Header{}
			pc.auth(h, tok)
			for range kinds {
				resp, b := r.do(t, http.MethodPost, pc.proto.Path(), h, pc.body(pc.model, 10))
				require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
				require.True(t, json.Valid(b))
			}
			ents := auditEntries(t, r.audit)
			require.Len(t, ents, len(kinds))
			for _, e := range ents {
				assert.Equal(t, OutcomeForwarded, e.Outcome)
				require.NotNil(t, e.InputTokens)
				require.NotNil(t, e.OutputTokens)
				if pc.proto == OpenAI {
					assert.Equal(t, int64(11), *e.InputTokens)
					assert.Equal(t, int64(7), *e.OutputTokens)
				} else {
					assert.Equal(t, int64(13), *e.InputTokens)
					assert.Equal(t, int64(5), *e.OutputTokens)
				}
				assert.Equal(t, pc.model, e.Model)
				assert.Equal(t, string(pc.proto), e.Protocol)
				assert.Positive(t, e.RequestBytes)
				assert.Positive(t, e.ResponseBytes)
			}
		})
	}
}

func TestProxyUpstreamFailures(t *testing.T) {
	for _, pc := range protocols() {
		t.Run(string(pc.proto), func(t *testing.T) {
			cases := []struct {
				name   string
				turn   fakeprovider.Turn
				status int
				code   string // "" = the provider's answer, passed through
			}{
				{"429", fakeprovider.Turn{Kind: fakeprovider.RateLimited}, 429, ""},
				{"529", fakeprovider.Turn{Kind: fakeprovider.Overloaded}, 529, ""},
				{"500", fakeprovider.Turn{Kind: fakeprovider.ServerError}, 500, ""},
				{"malformed", fakeprovider.Turn{Kind: fakeprovider.Malformed}, 502, CodeUpstreamInvalid},
				{"duplicate keys", fakeprovider.Turn{Kind: fakeprovider.Raw, Body: `{"id":"a","id":"b"}`}, 502, CodeUpstreamInvalid},
				{"not an object", fakeprovider.Turn{Kind: fakeprovider.Raw, Body: `[1]`}, 502, CodeUpstreamInvalid},
				{"empty 200", fakeprovider.Turn{Kind: fakeprovider.Raw, Body: ``}, 502, CodeUpstreamInvalid},
				{"202", fakeprovider.Turn{Kind: fakeprovider.Raw, Status: 202, Body: `{}`}, 502, CodeUpstreamInvalid},
				{"redirect", fakeprovider.Turn{Kind: fakeprovider.Raw, Status: 307, Body: `{}`}, 502, CodeUpstreamInvalid},
				{"oversized", fakeprovider.Turn{Kind: fakeprovider.Oversized, Size: 70 << 10}, 502, CodeUpstreamTooLarge},
				{"oversized error", fakeprovider.Turn{Kind: fakeprovider.Raw, Status: 500, Body: strings.Repeat("e", 70<<10)}, 502, CodeUpstreamTooLarge},
				{"hang", fakeprovider.Turn{Kind: fakeprovider.Hang}, 504, CodeUpstreamTimeout},
			}
			var script []fakeprovider.Turn
			for _, tc := range cases {
				script = append(script, tc.turn)
			}
			r := newRig(t, script...)
			l := defaultLimits()
			l.Timeout = 500 * time.Millisecond
			l.MaxRequests = 100
			tok := r.issue(t, l)
			h := http.Header{}
			pc.auth(h, tok)
			for _, tc := range cases {
				resp, b := r.do(t, http.MethodPost, pc.proto.Path(), h, pc.body(pc.model, 10))
				assert.Equal(t, tc.status, resp.StatusCode, tc.name)
				if tc.code != "" {
					assert.Equal(t, tc.code, errorCode(t, b), tc.name)
					assert.NotContains(t, string(b), "choices", "%s: nothing of the provider's answer leaks", tc.name)
					assert.NotContains(t, string(b), "xxxx", tc.name)
				}
			}
			assert.Equal(t, len(cases), r.fake.Count())
			for _, d := range r.proxy.Dials() {
				assert.Equal(t, r.fake.Addr(), d, "a dial went somewhere other than the fake provider")
			}
			assert.Equal(t, len(r.proxy.Dials()), r.fake.Conns(), "every dial reached the fake")
		})
	}
}

func TestProxySilentAndUnreachableUpstream(t *testing.T) {
	fake := fakeprovider.New(t)
	silent, accepted := fakeprovider.Silent(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "https://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name, base string
		status     int
		code       string
	}{
		{"accepts and never answers", silent, 504, CodeUpstreamTimeout},
		{"refuses connections", closed, 502, CodeUpstreamFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigFor(t, fake, tc.base)
			lim := defaultLimits()
			lim.Timeout = 500 * time.Millisecond
			tok := r.issue(t, lim)
			for _, pc := range protocols() {
				h := http.Header{}
				pc.auth(h, tok)
				resp, b := r.do(t, http.MethodPost, pc.proto.Path(), h, pc.body(pc.model, 10))
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, tc.code, errorCode(t, b))
			}
		})
	}
	assert.Positive(t, accepted())
	assert.Zero(t, fake.Count())
}

func TestProxyVerifiesUpstreamTLS(t *testing.T) {
	fake := fakeprovider.New(t)
	audit := &fixture.SyncBuffer{}
	// No TestOnlyRootCAs: the system roots, which do not hold the fake's CA.
	p, err := New(Options{Targets: []Target{{Protocol: OpenAI, BaseURL: fake.URL(), Key: openAIKey}}, Audit: audit})
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	defer srv.Close()
	tok, err := p.Issue(CallerAgent, Limits{Models: map[Protocol]string{OpenAI: openAIModel}, MaxRequests: 1, MaxTokens: 10,
		MaxRequestBytes: 1 << 16, MaxResponseBytes: 1 << 16, Timeout: 5 * time.Second})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+OpenAI.Path(), bytes.NewReader(fakeprovider.OpenAIRequest(openAIModel, 10)))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, CodeUpstreamFailed, errorCode(t, b))
	assert.Zero(t, fake.Count(), "an unverified upstream receives no request (and no key)")
}

func TestNewRefusesUnsafeTargets(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Target
	}{
		{"http remote", Target{Protocol: OpenAI, BaseURL: "http://api.openai.com", Key: "k"}},
		{"http name", Target{Protocol: OpenAI, BaseURL: "http://localhost:80", Key: "k"}},
		{"user info", Target{Protocol: OpenAI, BaseURL: "https://u:p@api.openai.com", Key: "k"}},
		{"query", Target{Protocol: OpenAI, BaseURL: "https://api.openai.com?x=1", Key: "k"}},
		{"ftp", Target{Protocol: OpenAI, BaseURL: "ftp://api.openai.com", Key: "k"}},
		{"empty key", Target{Protocol: OpenAI, BaseURL: "https://api.openai.com"}},
		{"key with newline", Target{Protocol: OpenAI, BaseURL: "https://api.openai.com", Key: "k\r\nX-Evil: 1"}},
		{"unknown protocol", Target{Protocol: "gemini", BaseURL: "https://x", Key: "k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Targets: []Target{tc.t}, Audit: io.Discard})
			assert.Error(t, err)
		})
	}
	_, err := New(Options{Targets: []Target{{Protocol: OpenAI, BaseURL: "http://127.0.0.1:9/prefix/", Key: "k"}}, Audit: io.Discard})
	assert.NoError(t, err, "plain http to loopback is allowed, for local servers and tests")
}

func TestAuditHoldsMetadataOnly(t *testing.T) {
	for _, pc := range protocols() {
		t.Run(string(pc.proto), func(t *testing.T) {
			r := newRig(t, fakeprovider.Turn{Kind: fakeprovider.Finish, Args: map[string]any{"result": "PROVIDER-SECRET-ANSWER"}})
			tok := r.issue(t, defaultLimits())
			h := http.Header{}
			pc.auth(h, tok)
			h.Set("X-Custom", "HEADER-VALUE-MARK")
			body := []byte(strings.Replace(string(pc.body(pc.model, 10)), "hello", "BODY-CONTENT-MARK", 1))
			resp, b := r.do(t, http.MethodPost, pc.proto.Path(), h, body)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Contains(t, string(b), "PROVIDER-SECRET-ANSWER")
			r.do(t, http.MethodPost, "/v1/unknown%7Fpath", h, body)
			log := r.audit.String()
			for _, s := range []string{"BODY-CONTENT-MARK", "PROVIDER-SECRET-ANSWER", "HEADER-VALUE-MARK", tok, openAIKey, anthropicKey} {
				assert.NotContains(t, log, s)
			}
			ents := auditEntries(t, r.audit)
			require.Len(t, ents, 2)
			e := ents[0]
			assert.Equal(t, CallerAgent, e.Caller)
			assert.Equal(t, pc.proto.Path(), e.Path)
			assert.Equal(t, "POST", e.Method)
			assert.Equal(t, 200, e.Status)
			assert.Equal(t, 200, e.UpstreamStatus)
			assert.Equal(t, int64(len(body)), e.RequestBytes)
			assert.Equal(t, int64(len(b)), e.ResponseBytes)
			assert.Len(t, e.RequestID, 24)
			assert.Equal(t, resp.Header.Get("X-Awf-Request-Id"), e.RequestID)
			_, err := time.Parse(time.RFC3339Nano, e.TS)
			assert.NoError(t, err)
			assert.Equal(t, "/v1/unknownpath", ents[1].Path, "control characters are removed")
		})
	}
}

func TestOpenAuditFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, AuditFile)
	f, err := OpenAuditFile(p)
	require.NoError(t, err)
	f.Close()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	link := filepath.Join(dir, "link.jsonl")
	require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere"), link))
	_, err = OpenAuditFile(link)
	assert.Error(t, err, "never through a symbolic link")
}

func TestEveryRefusalCodeHasItsStatus(t *testing.T) {
	for code, want := range map[string]int{
		CodeCapabilityMissing: 401, CodeCapabilityInvalid: 401, CodeCapabilityRevoked: 401,
		CodeUnknownPath: 404, CodeTargetUnconfigured: 404, CodeMethodNotAllowed: 405,
		CodeQueryNotAllowed: 400, CodeRequestTooLarge: 413, CodeRequestTimeout: 408,
		CodeInvalidJSON: 400, CodeInvalidField: 400, CodeMaxTokensRequired: 400,
		CodeModelNotAllowed: 403, CodeStreamNotAllowed: 403, CodeChoicesNotAllowed: 403,
		CodeMaxTokensExceeded: 403, CodeRequestsExhausted: 403,
		CodeUpstreamTimeout: 504, CodeUpstreamFailed: 502, CodeUpstreamTooLarge: 502, CodeUpstreamInvalid: 502,
	} {
		rf := &Refusal{Code: code, Message: "m"}
		assert.Equal(t, want, rf.Status(), code)
		assert.NotEqual(t, http.StatusTooManyRequests, rf.Status(), "no refusal invites an SDK retry")
		for _, p := range []Protocol{OpenAI, Anthropic} {
			assert.Equal(t, code, errorCode(t, rf.body(p)), "%s in the %s shape", code, p)
		}
	}
}
