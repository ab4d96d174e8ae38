package apiproxy

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// CallerAgent is the caller name of the primary agent's capability.
const CallerAgent = "agent"

// capabilityPrefix starts every capability, so that one found in a log or a
// file is recognisable; the 64 hex digits after it are 256 random bits.
const capabilityPrefix = "awf-cap-"

var callerShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) })

// Limits is what one capability may spend. Every field must be set: there
// is no zero value that means "unlimited".
type Limits struct {
	// Models is the one model allowed per protocol; a protocol that is not
	// a key refuses every request of this capability.
	Models map[Protocol]string
	// MaxRequests is how many requests are forwarded upstream, in total.
	MaxRequests int
	// MaxTokens caps max_tokens / max_completion_tokens of one request.
	MaxTokens int
	// MaxRequestBytes and MaxResponseBytes cap one body each way.
	MaxRequestBytes  int64
	MaxResponseBytes int64
	// Timeout is the deadline of one request, upstream included.
	Timeout time.Duration
}

func (l Limits) validate() error {
	switch {
	case len(l.Models) == 0:
		return errors.New("limits: no model")
	case l.MaxRequests <= 0 || l.MaxTokens <= 0 || l.MaxRequestBytes <= 0 || l.MaxResponseBytes <= 0 || l.Timeout <= 0:
		return errors.New("limits: every limit must be positive")
	}
	for p, m := range l.Models {
		if p != OpenAI && p != Anthropic {
			return fmt.Errorf("limits: unknown protocol %q", p)
		}
		if m == "" {
			return fmt.Errorf("limits: empty model for %s", p)
		}
	}
	return nil
}

// capability is one issued capability. Fields after limits are guarded by
// the registry's mu.
type capability struct {
	token  []byte // the whole token, compared in constant time
	caller string
	limits Limits
	// transport is this capability's own upstream connection pool.
	transport *http.Transport

	used    int
	revoked bool
}

// registry holds the issued capabilities, keyed by the SHA-256 of the
// token: a map lookup on a hash reveals nothing usable about a token, and
// the final comparison of the token itself is constant-time.
type registry struct {
	mu   sync.Mutex
	caps map[[sha256.Size]byte]*capability
}

func newRegistry() *registry {
	return &registry{caps: map[[sha256.Size]byte]*capability{}}
}

// issue creates a capability for caller with limits l, whose requests go
// upstream through rt alone, and returns its token.
func (r *registry) issue(caller string, l Limits, rt *http.Transport) (string, error) {
	if !callerShape().MatchString(caller) {
		return "", fmt.Errorf("capability: caller %q: want 1..64 of A-Z a-z 0-9 . _ -", caller)
	}
	if err := l.validate(); err != nil {
		return "", fmt.Errorf("capability for %s: %w", caller, err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("capability: random: %w", err)
	}
	tok := capabilityPrefix + hex.EncodeToString(raw[:])
	models := make(map[Protocol]string, len(l.Models))
	for p, m := range l.Models {
		models[p] = m
	}
	l.Models = models
	r.mu.Lock()
	defer r.mu.Unlock()
	r.caps[sha256.Sum256([]byte(tok))] = &capability{token: []byte(tok), caller: caller, limits: l, transport: rt}
	return tok, nil
}

// closeIdle closes the idle upstream connections of every capability.
func (r *registry) closeIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.caps {
		c.transport.CloseIdleConnections()
	}
}

// revoke marks tok revoked; it reports whether tok was issued. A revoked
// capability stays known, so that its later use is audited as such.
func (r *registry) revoke(tok string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(tok)
	if c == nil {
		return false
	}
	c.revoked = true
	// Its requests are over (the broker revokes after teardown); one still
	// in flight returns its connection to this pool, which nobody reuses.
	c.transport.CloseIdleConnections()
	return true
}

// lookupLocked finds tok; mu held.
func (r *registry) lookupLocked(tok string) *capability {
	c := r.caps[sha256.Sum256([]byte(tok))]
	if c == nil || subtle.ConstantTimeCompare(c.token, []byte(tok)) != 1 {
		return nil
	}
	return c
}

// authenticate returns tok's capability (its caller and limits never
// change after issue), or the refusal for a missing, unknown or revoked one.
func (r *registry) authenticate(tok string) (*capability, *Refusal) {
	if tok == "" {
		return nil, refuse(CodeCapabilityMissing, "no capability: send it as the API key (Authorization: Bearer or x-api-key)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.lookupLocked(tok)
	switch {
	case c == nil:
		return nil, refuse(CodeCapabilityInvalid, "the capability is not valid")
	case c.revoked:
		return nil, refuse(CodeCapabilityRevoked, "the capability has been revoked")
	}
	return c, nil
}

// reserve charges one request to c, or refuses when c is revoked or spent.
// A reserved request is never refunded, whatever the provider answers.
func (r *registry) reserve(c *capability) *Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.revoked {
		return refuse(CodeCapabilityRevoked, "the capability has been revoked")
	}
	if c.used >= c.limits.MaxRequests {
		return refuse(CodeRequestsExhausted, "this caller's %d model requests are spent", c.limits.MaxRequests)
	}
	c.used++
	return nil
}

// credential extracts the caller's capability from the headers SDKs send
// their API key in: OpenAI's Authorization: Bearer, Anthropic's x-api-key.
// Both may be present only with the same value.
func credential(authorization []string, apiKey []string) (string, *Refusal) {
	if len(authorization) > 1 || len(apiKey) > 1 {
		return "", refuse(CodeCapabilityInvalid, "more than one credential header")
	}
	var bearer, key string
	if len(authorization) == 1 {
		scheme, v, ok := strings.Cut(authorization[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", refuse(CodeCapabilityInvalid, "Authorization must be Bearer")
		}
		bearer = strings.TrimSpace(v)
	}
	if len(apiKey) == 1 {
		key = strings.TrimSpace(apiKey[0])
	}
	switch {
	case bearer != "" && key != "" && subtle.ConstantTimeCompare([]byte(bearer), []byte(key)) != 1:
		return "", refuse(CodeCapabilityInvalid, "Authorization and x-api-key disagree")
	case bearer != "":
		return bearer, nil
	}
	return key, nil
}
