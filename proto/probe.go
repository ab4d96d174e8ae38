package proto

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Sealed probes v1: the three-outcome interface of the original design. The
// agent names one repository and exactly three outcome labels; the broker
// builds the closed schema itself from those labels plus the reserved ERROR,
// and the caller sees one of four symbols, at most two bits per invocation.
// The framing is the reference's v1 wire protocol, so its own client works
// unchanged: POST /probe, X-AWF-Probe-Version: 1, X-AWF-Repo and
// X-AWF-Outcome-1..3, the script as the body.
const (
	HeaderProbeVersion = "x-awf-probe-version"
	HeaderOutcome1     = "x-awf-outcome-1"
	HeaderOutcome2     = "x-awf-outcome-2"
	HeaderOutcome3     = "x-awf-outcome-3"
	// ProbeProtocolVersion is the one accepted X-AWF-Probe-Version.
	ProbeProtocolVersion = "1"
	// ProbeRoute is the probe broker's one route.
	ProbeRoute = "/probe"
	// ProbeOutcomes is the number of caller outcomes.
	ProbeOutcomes = 3
	// ProbeErrorOutcome is the reserved fourth symbol: every failure.
	ProbeErrorOutcome = "ERROR"
	// MaxOutcomeBytes caps one outcome label in UTF-8 bytes.
	MaxOutcomeBytes = 64
	// MaxProbeRequestBytes is the reference's cap on a whole probe request
	// (256 KiB).
	MaxProbeRequestBytes = 256 << 10
	// MaxProbeScriptBytes caps a probe's script, its request body, at the
	// reference's whole-request cap, so that every request the reference's
	// client could send is accepted (the headers have their own 8 KiB cap).
	// A query script keeps MaxScriptBytes: its schema and skill say so.
	MaxProbeScriptBytes = MaxProbeRequestBytes
	// MaxProbeResultBytes caps /probe/out (the reference's 1 KiB).
	MaxProbeResultBytes = 1024
	// ProbeErrorBody is the one canonical failure body and CLI line.
	ProbeErrorBody = `{"result":"ERROR"}`
	// ProbeScriptDir is the directory the script sees: its private writable
	// repository copy at ProbeScriptDir/repo and the result at ProbeScriptDir/out.
	ProbeScriptDir = "/probe"
)

// ProbeHeaderNames returns the framing headers of a probe, version first, in
// the order the client sends them. It returns a fresh slice each call.
func ProbeHeaderNames() []string {
	return []string{HeaderProbeVersion, HeaderRepo, HeaderOutcome1, HeaderOutcome2, HeaderOutcome3}
}

// ErrProbeOutput marks /probe/out contents that are not one declared outcome.
var ErrProbeOutput = errors.New("probe output")

// ValidateOutcome checks one outcome label: non-empty, at most
// MaxOutcomeBytes of valid UTF-8, no control character (C0, DEL, C1), no
// leading or trailing space (HTTP would strip it), and never the reserved
// ERROR. Errors wrap ErrRequest.
func ValidateOutcome(s string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: outcome %.80q: %s", ErrRequest, s, fmt.Sprintf(format, args...))
	}
	switch {
	case s == "":
		return fmt.Errorf("%w: outcome is empty", ErrRequest)
	case len(s) > MaxOutcomeBytes:
		return bad("is %d bytes; the maximum is %d", len(s), MaxOutcomeBytes)
	case !utf8.ValidString(s):
		return bad("is not valid UTF-8")
	case s == ProbeErrorOutcome:
		return bad("ERROR is reserved for failures")
	case s[0] == ' ' || s[len(s)-1] == ' ':
		return bad("must not begin or end with a space")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return bad("contains the control character U+%04X", r)
		}
	}
	return nil
}

// ValidateOutcomes checks exactly ProbeOutcomes labels, each valid and all
// distinct.
func ValidateOutcomes(outcomes []string) error {
	if len(outcomes) != ProbeOutcomes {
		return fmt.Errorf("%w: %d outcomes; exactly %d are required", ErrRequest, len(outcomes), ProbeOutcomes)
	}
	for i, o := range outcomes {
		if err := ValidateOutcome(o); err != nil {
			return err
		}
		for _, p := range outcomes[:i] {
			if p == o {
				return fmt.Errorf("%w: outcome %.80q is given twice", ErrRequest, o)
			}
		}
	}
	return nil
}

// ProbeRequest is a validated sealed-probe request.
type ProbeRequest struct {
	Repo     string
	Outcomes [ProbeOutcomes]string
	Script   []byte
	// Schema is the closed result schema the broker built from Outcomes:
	// an object with the one field "result", an enum of the three outcomes
	// and ERROR. It is never taken from the caller.
	Schema *Schema
}

// ValidateProbeRequest checks a probe's repository, outcomes and script and
// builds its closed schema. Errors wrap ErrRequest.
func ValidateProbeRequest(repo string, outcomes []string, script []byte) (*ProbeRequest, error) {
	if err := ValidateRepoSlug(repo); err != nil {
		return nil, err
	}
	if err := ValidateOutcomes(outcomes); err != nil {
		return nil, err
	}
	if err := validateScriptMax(script, MaxProbeScriptBytes); err != nil {
		return nil, err
	}
	s, err := ProbeSchema(outcomes)
	if err != nil {
		return nil, err
	}
	r := &ProbeRequest{Repo: repo, Script: script, Schema: s}
	copy(r.Outcomes[:], outcomes)
	return r, nil
}

// ProbeSchema builds the closed schema of a probe from its outcomes: in the
// seed's JSON Schema words, {"type":"object","properties":{"result":{"type":
// "string","enum":[A,B,C,"ERROR"]}},"required":["result"],
// "additionalProperties":false}; in the schema language of this package, an
// object whose only field is an enum of the four strings.
func ProbeSchema(outcomes []string) (*Schema, error) {
	if err := ValidateOutcomes(outcomes); err != nil {
		return nil, err
	}
	values := append(append([]string{}, outcomes...), ProbeErrorOutcome)
	doc := map[string]any{"type": "object", "fields": map[string]any{
		"result": map[string]any{"type": "enum", "values": values},
	}}
	text, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: probe schema: %v", ErrRequest, err)
	}
	s, err := ParseSchema(text)
	if err != nil {
		return nil, fmt.Errorf("%w: probe schema: %v", ErrRequest, err)
	}
	return s, nil
}

// CheckProbeResult parses a /probe/out file strictly against the request's
// closed schema (valid UTF-8, one JSON object with exactly the field
// "result", no duplicate key, nothing after it, a value among the outcomes)
// and returns the canonical body {"result":"<outcome>"}. A script-written
// ERROR is a failure like any other: it adds no symbol. Errors wrap
// ErrProbeOutput.
func (r *ProbeRequest) CheckResult(out []byte) ([]byte, error) {
	if len(out) > MaxProbeResultBytes {
		return nil, fmt.Errorf("%w: %d bytes; the cap is %d", ErrProbeOutput, len(out), MaxProbeResultBytes)
	}
	c, err := r.Schema.CheckResult(out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProbeOutput, err)
	}
	if string(c) == ProbeErrorBody {
		return nil, fmt.Errorf("%w: the script wrote ERROR", ErrProbeOutput)
	}
	return c, nil
}

// ProbeResultBodies returns the four bodies a probe can answer: one per
// outcome, then the error body. The client prints a broker body only when it
// is one of them.
func ProbeResultBodies(outcomes []string) []string {
	out := make([]string, 0, len(outcomes)+1)
	for _, o := range append(append([]string{}, outcomes...), ProbeErrorOutcome) {
		out = append(out, `{"result":`+string(appendString(nil, o))+`}`)
	}
	return out
}
