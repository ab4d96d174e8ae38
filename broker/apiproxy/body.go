package apiproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/awf-project/awf/broker/jsonfile"
)

// Bounds of the strict scanner.
const (
	// maxJSONDepth bounds nesting; tool schemas nest, but not this deep.
	maxJSONDepth = 128
	// maxTopKeys bounds the top-level keys of one request or response.
	maxTopKeys = 256
)

// composite stands for a top-level value that is an object or an array.
type composite struct{}

// scanObject checks that b is exactly one JSON object, valid UTF-8, with no
// duplicate key in any object, no two top-level keys equal under Unicode
// case folding (some servers match keys case-insensitively, and the proxy
// must check the value the provider will use), at most maxJSONDepth deep,
// and nothing after it. It returns the top-level values of the keys named
// in want: a string, a json.Number, a bool, nil for null, or composite{}.
// A top-level key that folds to a wanted key without being it is refused.
func scanObject(b []byte, want ...string) (map[string]any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("body is not a JSON object")
	}
	got := map[string]any{}
	var keys []string
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("body is not JSON: %w", err)
		}
		k := kt.(string)
		for _, prev := range keys {
			if strings.EqualFold(prev, k) {
				return nil, fmt.Errorf("duplicate top-level key %s", strconv.QuoteToASCII(k))
			}
		}
		if len(keys) == maxTopKeys {
			return nil, fmt.Errorf("more than %d top-level keys", maxTopKeys)
		}
		keys = append(keys, k)
		for _, w := range want {
			if k != w && strings.EqualFold(k, w) {
				return nil, fmt.Errorf("top-level key %s is not spelled %q", strconv.QuoteToASCII(k), w)
			}
		}
		v, err := scanValue(dec, 1)
		if err != nil {
			return nil, err
		}
		for _, w := range want {
			if k == w {
				got[k] = v
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("content after the JSON object")
	}
	return got, nil
}

// scanValue reads one value whose container is at depth, checking every
// nested object for duplicate keys.
func scanValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxJSONDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxJSONDepth)
	}
	switch d {
	case '{':
		seen := map[string]struct{}{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("body is not JSON: %w", err)
			}
			k := kt.(string)
			if _, dup := seen[k]; dup {
				return nil, fmt.Errorf("duplicate key %s", strconv.QuoteToASCII(k))
			}
			seen[k] = struct{}{}
			if _, err := scanValue(dec, depth+1); err != nil {
				return nil, err
			}
		}
	case '[':
		for dec.More() {
			if _, err := scanValue(dec, depth+1); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("body is not JSON: unexpected %q", d)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return composite{}, nil
}

// tokenCount is a positive decimal integer without sign, fraction or
// exponent, short enough to fit comfortably in an int64.
var tokenCount = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[1-9][0-9]{0,11}$`) })

// checked is what checkRequest learned from a body it accepted.
type checked struct {
	Model     string
	MaxTokens int64
}

// checkRequest applies a capability's body rules for protocol p: model is
// exactly the allowed one, stream is absent or false, OpenAI's n is absent
// or 1, and the output cap is stated (max_tokens for Anthropic;
// max_completion_tokens or max_tokens for OpenAI, each one that is present)
// and at most maxTokens. A missing cap is refused rather than added: the
// proxy forwards the caller's bytes unchanged, as it does with the model.
func checkRequest(p Protocol, b []byte, allowedModel string, maxTokens int) (checked, *Refusal) {
	var c checked
	f, err := scanObject(b, "model", "stream", "n", "max_tokens", "max_completion_tokens")
	if err != nil {
		return c, refuse(CodeInvalidJSON, "request body: %v", err)
	}
	model, ok := f["model"].(string)
	if !ok {
		return c, refuse(CodeModelNotAllowed, "request must name the model as a string")
	}
	if model != allowedModel {
		return c, refuse(CodeModelNotAllowed, "model %s is not allowed for this caller (it is never rewritten)", strconv.QuoteToASCII(jsonfile.Clip(model, 128)))
	}
	c.Model = model
	if v, ok := f["stream"]; ok {
		if bv, isBool := v.(bool); !isBool || bv {
			return c, refuse(CodeStreamNotAllowed, "streaming is not supported: stream must be absent or false")
		}
	}
	if v, ok := f["n"]; ok && p == OpenAI {
		if n, isNum := v.(json.Number); !isNum || n.String() != "1" {
			return c, refuse(CodeChoicesNotAllowed, "n must be absent or 1")
		}
	}
	names := []string{"max_tokens"}
	if p == OpenAI {
		names = []string{"max_completion_tokens", "max_tokens"}
	}
	stated := false
	for _, name := range names {
		v, ok := f[name]
		if !ok {
			continue
		}
		n, isNum := v.(json.Number)
		if !isNum || !tokenCount().MatchString(n.String()) {
			return c, refuse(CodeInvalidField, "%s must be a positive integer", name)
		}
		t, _ := strconv.ParseInt(n.String(), 10, 64)
		if t > int64(maxTokens) {
			return c, refuse(CodeMaxTokensExceeded, "%s %d exceeds this caller's cap of %d", name, t, maxTokens)
		}
		if t > c.MaxTokens {
			c.MaxTokens = t
		}
		stated = true
	}
	if !stated {
		return c, refuse(CodeMaxTokensRequired, "the request must state %s (at most %d)", names[0], maxTokens)
	}
	return c, nil
}
