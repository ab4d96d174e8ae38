package apiproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The codes of the proxy's own refusals. Each is the error type of the JSON
// body the caller receives and the outcome in the audit log; the status it
// goes with is in refusalStatus.
const (
	CodeCapabilityMissing  = "capability_missing"
	CodeCapabilityInvalid  = "capability_invalid"
	CodeCapabilityRevoked  = "capability_revoked"
	CodeUnknownPath        = "unknown_path"
	CodeTargetUnconfigured = "target_not_configured"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeQueryNotAllowed    = "query_not_allowed"
	CodeRequestTooLarge    = "request_too_large"
	CodeRequestTimeout     = "request_timeout"
	CodeInvalidJSON        = "invalid_json"
	CodeInvalidField       = "invalid_field"
	CodeModelNotAllowed    = "model_not_allowed"
	CodeStreamNotAllowed   = "stream_not_allowed"
	CodeChoicesNotAllowed  = "choices_not_allowed"
	CodeMaxTokensRequired  = "max_tokens_required"
	CodeMaxTokensExceeded  = "max_tokens_exceeds_cap"
	CodeRequestsExhausted  = "max_model_requests_exceeded"
	CodeUpstreamTimeout    = "upstream_timeout"
	CodeUpstreamFailed     = "upstream_unreachable"
	CodeUpstreamTooLarge   = "upstream_response_too_large"
	CodeUpstreamInvalid    = "upstream_response_invalid"
)

// Refusal is a request the proxy answers itself, without (or instead of)
// the provider's answer. Message is fixed text of the proxy's, never a
// provider's or caller's bytes.
type Refusal struct {
	Code    string
	Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// Status is the HTTP status the refusal is answered with. Policy refusals
// are 403, never 429: SDKs retry 429, and a cap never recovers within a run.
func (r *Refusal) Status() int {
	switch r.Code {
	case CodeCapabilityMissing, CodeCapabilityInvalid, CodeCapabilityRevoked:
		return http.StatusUnauthorized
	case CodeUnknownPath, CodeTargetUnconfigured:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeQueryNotAllowed, CodeInvalidJSON, CodeInvalidField, CodeMaxTokensRequired:
		return http.StatusBadRequest
	case CodeRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeRequestTimeout:
		return http.StatusRequestTimeout
	case CodeModelNotAllowed, CodeStreamNotAllowed, CodeChoicesNotAllowed, CodeMaxTokensExceeded, CodeRequestsExhausted:
		return http.StatusForbidden
	case CodeUpstreamTimeout:
		return http.StatusGatewayTimeout
	case CodeUpstreamFailed, CodeUpstreamTooLarge, CodeUpstreamInvalid:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

func refuse(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// body renders the refusal in the error shape of protocol p, so that an
// SDK reports it as an API error with the code as its type: OpenAI's
// {"error":{"message","type","code"}} or Anthropic's
// {"type":"error","error":{"type","message"}}.
func (r *Refusal) body(p Protocol) []byte {
	var v any
	if p == Anthropic {
		v = map[string]any{"type": "error", "error": map[string]string{"type": r.Code, "message": r.Message}}
	} else {
		v = map[string]any{"error": map[string]any{"message": r.Message, "type": r.Code, "code": r.Code, "param": nil}}
	}
	b, _ := json.Marshal(v)
	return b
}
