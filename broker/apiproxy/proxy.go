package apiproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/awf-project/awf/broker/jsonfile"
)

// Protocol is a provider wire protocol.
type Protocol string

// The protocols, named as apiProxy.targets names them.
const (
	OpenAI    Protocol = "openai"
	Anthropic Protocol = "anthropic"
)

// AnthropicVersion is the anthropic-version header the proxy always sends,
// whatever the caller sent: the API surface the proxy's checks were written
// against.
const AnthropicVersion = "2023-06-01"

// Path is the one path the protocol's requests use, on the proxy and
// after the upstream's base URL.
func (p Protocol) Path() string {
	if p == Anthropic {
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// protocolOf maps a request path to its protocol.
func protocolOf(path string) (Protocol, bool) {
	switch path {
	case OpenAI.Path():
		return OpenAI, true
	case Anthropic.Path():
		return Anthropic, true
	}
	return "", false
}

// Target is one upstream: where a protocol's requests go and the key they
// carry there.
type Target struct {
	Protocol Protocol
	// BaseURL is https, or http to a loopback IP address; the protocol's
	// path is appended to it.
	BaseURL string
	// Key is the provider credential. It is never logged and never
	// returned to a caller.
	Key string
}

// Options configures a Proxy.
type Options struct {
	Targets []Target
	// Audit receives one JSON line per request (Entry). Required.
	Audit io.Writer
	// TestOnlyRootCAs replaces the system roots for upstream TLS. Only tests
	// set it (an httptest server's CA); nothing in the configuration or the
	// serve spec reaches it, and nothing turns verification off.
	TestOnlyRootCAs *x509.CertPool
}

// upstream is a configured target ready to use.
type upstream struct {
	protocol Protocol
	url      string // base URL + path
	key      string
}

// Proxy is the API proxy's HTTP handler. It is safe for concurrent use.
type Proxy struct {
	upstreams map[Protocol]*upstream
	// dialer and roots make each capability's own connection pool
	// (newTransport).
	dialer *net.Dialer
	roots  *x509.CertPool
	caps   *registry
	audit  *jsonfile.Log
	now    func() time.Time

	dialsMu sync.Mutex // guards dials
	dials   []string
}

// New checks o and returns a proxy with no capability issued yet.
func New(o Options) (*Proxy, error) {
	if o.Audit == nil {
		return nil, errors.New("api proxy: no audit log")
	}
	if len(o.Targets) == 0 {
		return nil, errors.New("api proxy: no target")
	}
	p := &Proxy{upstreams: map[Protocol]*upstream{}, caps: newRegistry(), audit: jsonfile.NewLog(o.Audit, "awf api-proxy"), now: time.Now}
	for _, t := range o.Targets {
		if t.Protocol != OpenAI && t.Protocol != Anthropic {
			return nil, fmt.Errorf("api proxy: unknown protocol %q", t.Protocol)
		}
		if _, dup := p.upstreams[t.Protocol]; dup {
			return nil, fmt.Errorf("api proxy: %s configured twice", t.Protocol)
		}
		if t.Key == "" {
			return nil, fmt.Errorf("api proxy: %s: empty key", t.Protocol)
		}
		if strings.ContainsAny(t.Key, "\r\n\x00") {
			return nil, fmt.Errorf("api proxy: %s: the key holds a control character", t.Protocol)
		}
		base, err := checkBaseURL(t.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("api proxy: %s: %w", t.Protocol, err)
		}
		p.upstreams[t.Protocol] = &upstream{protocol: t.Protocol, url: base + t.Protocol.Path(), key: t.Key}
	}
	p.dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	p.roots = o.TestOnlyRootCAs
	return p, nil
}

// newTransport is one upstream connection pool. Each capability gets its
// own (Issue), so no caller finds a connection, a TLS session or an HTTP/2
// stream count that another caller's requests left: the primary agent
// cannot time whether an enclave, which reads the repository, spoke to the
// provider, or how much.
func (p *Proxy) newTransport() *http.Transport {
	return &http.Transport{
		// Never an HTTP(S)_PROXY from the environment: the upstream is
		// the configured one, reached directly.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			p.dialsMu.Lock()
			p.dials = append(p.dials, addr)
			p.dialsMu.Unlock()
			return p.dialer.DialContext(ctx, network, addr)
		},
		// RootCAs nil means the system roots; verification is never off.
		TLSClientConfig:        &tls.Config{RootCAs: p.roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// checkBaseURL accepts https, or http to a loopback IP address only; no
// user info, query or fragment. It returns the URL without a trailing /.
func checkBaseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("base URL: %w", err)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("base URL %q: want scheme://host[:port][/prefix] only", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		ip := net.ParseIP(u.Hostname())
		if ip == nil || !ip.IsLoopback() {
			return "", fmt.Errorf("base URL %q: plain http only to a loopback address", s)
		}
	default:
		return "", fmt.Errorf("base URL %q: want https", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// Issue creates a capability for caller (CallerAgent, or an invocation id)
// with its own limits, and returns its token: "awf-cap-" and 256 random
// bits in hex. The caller presents it as its API key.
func (p *Proxy) Issue(caller string, l Limits) (string, error) {
	for proto := range l.Models {
		if _, ok := p.upstreams[proto]; !ok {
			return "", fmt.Errorf("capability for %s: %s is not a configured target", caller, proto)
		}
	}
	return p.caps.issue(caller, l, p.newTransport())
}

// Revoke ends a capability: every later request with it is refused (and
// audited as revoked), and its idle upstream connections are closed. It
// reports whether token was issued here.
func (p *Proxy) Revoke(token string) bool { return p.caps.revoke(token) }

// Dials returns every upstream address the proxy has dialled, in order.
// Tests compare it with the fake provider's address to prove that no
// request went anywhere else.
func (p *Proxy) Dials() []string {
	p.dialsMu.Lock()
	defer p.dialsMu.Unlock()
	return append([]string(nil), p.dials...)
}

// Close drops every capability's idle upstream connections.
func (p *Proxy) Close() { p.caps.closeIdle() }

// responseHeaders are the upstream response headers a caller receives;
// every other one is dropped.
func responseHeaders() []string {
	return []string{"Content-Type", "Retry-After", "Retry-After-Ms", "X-Should-Retry", "X-Request-Id", "Request-Id"}
}

// ServeHTTP handles one caller request: authenticate, route, check the
// method and body against the capability's limits, charge it, forward it,
// check the answer, and log the metadata.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := p.now()
	e := Entry{RequestID: newRequestID(), Caller: CallerUnauthenticated, Method: logPath(r.Method), Path: logPath(r.URL.Path)}
	proto, _ := protocolOf(r.URL.Path)
	status, respBytes, rf := p.serve(w, r, &e)
	if rf != nil {
		body := rf.body(proto)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Awf-Request-Id", e.RequestID)
		w.WriteHeader(rf.Status())
		_, _ = w.Write(body)
		status, respBytes, e.Outcome = rf.Status(), int64(len(body)), rf.Code
	}
	e.Status, e.ResponseBytes = status, respBytes
	e.TS = stamp(start)
	e.DurationMs = p.now().Sub(start).Milliseconds()
	p.audit.Append(e)
}

// serve does the work of ServeHTTP. It either writes the forwarded answer
// itself and returns its status and size, or returns a refusal that
// ServeHTTP writes.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, e *Entry) (int, int64, *Refusal) {
	tok, rf := credential(r.Header.Values("Authorization"), r.Header.Values("X-Api-Key"))
	if rf != nil {
		return 0, 0, rf
	}
	c, rf := p.caps.authenticate(tok)
	if rf != nil {
		return 0, 0, rf
	}
	e.Caller = c.caller
	proto, ok := protocolOf(r.URL.Path)
	if !ok {
		return 0, 0, refuse(CodeUnknownPath, "only POST %s and POST %s are served", OpenAI.Path(), Anthropic.Path())
	}
	e.Protocol = string(proto)
	up := p.upstreams[proto]
	model, allowed := c.limits.Models[proto]
	if up == nil || !allowed {
		return 0, 0, refuse(CodeTargetUnconfigured, "%s is not available to this caller", proto)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return 0, 0, refuse(CodeMethodNotAllowed, "only POST is served")
	}
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		return 0, 0, refuse(CodeQueryNotAllowed, "the request URL must have no query")
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.limits.Timeout)
	defer cancel()
	body, rf := readCapped(ctx, r, c.limits.MaxRequestBytes)
	e.RequestBytes = int64(len(body))
	if rf != nil {
		return 0, 0, rf
	}
	ck, rf := checkRequest(proto, body, model, c.limits.MaxTokens)
	if rf != nil {
		return 0, 0, rf
	}
	e.Model = ck.Model
	if rf := p.caps.reserve(c); rf != nil {
		return 0, 0, rf
	}
	return p.forward(ctx, w, c.transport, up, body, c.limits.MaxResponseBytes, e)
}

// readCapped reads the request body, at most max bytes, within ctx.
func readCapped(ctx context.Context, r *http.Request, max int64) ([]byte, *Refusal) {
	if r.ContentLength > max {
		return nil, refuse(CodeRequestTooLarge, "the request body exceeds %d bytes", max)
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			return res.b, refuse(CodeInvalidJSON, "the request body could not be read")
		}
		if int64(len(res.b)) > max {
			return res.b[:max], refuse(CodeRequestTooLarge, "the request body exceeds %d bytes", max)
		}
		return res.b, nil
	case <-ctx.Done():
		// The server's read deadline ends the reader goroutine.
		return nil, refuse(CodeRequestTimeout, "the request body did not arrive before the deadline")
	}
}

// forward sends body upstream with the credential injected and only the
// proxy's own headers, reads the answer (capped, within ctx), checks that a
// 2xx answer is one strict JSON object, and writes it back with only the
// allowlisted headers.
func (p *Proxy) forward(ctx context.Context, w http.ResponseWriter, rt http.RoundTripper, up *upstream, body []byte, max int64, e *Entry) (int, int64, *Refusal) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, refuse(CodeUpstreamFailed, "the upstream request could not be built")
	}
	// A fresh header set: nothing of the caller's is carried over.
	req.Header = http.Header{}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "awf-api-proxy")
	switch up.protocol {
	case Anthropic:
		req.Header.Set("X-Api-Key", up.key)
		req.Header.Set("Anthropic-Version", AnthropicVersion)
	default:
		req.Header.Set("Authorization", "Bearer "+up.key)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, 0, refuse(CodeUpstreamTimeout, "the provider did not answer before the deadline")
		}
		return 0, 0, refuse(CodeUpstreamFailed, "the provider could not be reached")
	}
	defer resp.Body.Close()
	e.UpstreamStatus = resp.StatusCode
	raw, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	switch {
	case ctx.Err() != nil:
		// Past the deadline whatever arrived: the transport can still hand
		// over an answer that the cancellation itself provoked (an HTTP/1.1
		// server sees the client go and ends its handler with an empty 200).
		return 0, 0, refuse(CodeUpstreamTimeout, "the provider's answer did not complete before the deadline")
	case err != nil:
		return 0, 0, refuse(CodeUpstreamInvalid, "the provider's answer was cut short")
	case int64(len(raw)) > max:
		return 0, 0, refuse(CodeUpstreamTooLarge, "the provider's answer exceeds %d bytes", max)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if resp.StatusCode != http.StatusOK {
			return 0, 0, refuse(CodeUpstreamInvalid, "the provider answered %d", resp.StatusCode)
		}
		if _, err := scanObject(raw); err != nil {
			return 0, 0, refuse(CodeUpstreamInvalid, "the provider's answer is not one JSON object")
		}
		e.InputTokens, e.OutputTokens = usageOf(up.protocol, raw)
	} else if resp.StatusCode < 400 {
		// Redirects and the like are never followed or passed on.
		return 0, 0, refuse(CodeUpstreamInvalid, "the provider answered %d", resp.StatusCode)
	}
	h := w.Header()
	for _, k := range responseHeaders() {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("X-Awf-Request-Id", e.RequestID)
	h.Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(raw)
	e.Outcome = OutcomeForwarded
	return resp.StatusCode, int64(len(raw)), nil
}

// usageOf reads the token counts of a successful answer, for the log.
func usageOf(proto Protocol, raw []byte) (in, out *int64) {
	var v struct {
		Usage struct {
			PromptTokens     *int64 `json:"prompt_tokens"`
			CompletionTokens *int64 `json:"completion_tokens"`
			InputTokens      *int64 `json:"input_tokens"`
			OutputTokens     *int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil, nil
	}
	if proto == Anthropic {
		return v.Usage.InputTokens, v.Usage.OutputTokens
	}
	return v.Usage.PromptTokens, v.Usage.CompletionTokens
}

func newRequestID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "unknown"
	}
	return hex.EncodeToString(b[:])
}
