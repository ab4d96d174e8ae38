package apiproxy

import (
	"encoding/json"
	"testing"
)

// FuzzCheckRequest checks that the body rules never panic, that whatever
// they accept is one valid JSON object naming exactly the allowed model, and
// that a cap they accept is within bounds.
func FuzzCheckRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":10,"messages":[]}`,
		`{"model":"m","max_completion_tokens":10,"stream":false,"n":1}`,
		`{"model":"m","model":"m","max_tokens":1}`,
		`{"model":"m","Model":"x","max_tokens":1}`,
		`{"model":"m","max_tokens":1e1}`,
		`{"model":"m","max_tokens":10,"stream":true}`,
		`{"model":"m","max_tokens":10,"tools":[{"a":{"b":[1,2,{"c":null}]}}]}`,
		`{"model":"m","max_tokens":10} {}`,
		`[{"model":"m"}]`,
		"{\"model\":\"m\",\"max_tokens\":10,\"x\":\"\xff\"}",
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, anthropic bool) {
		p := OpenAI
		if anthropic {
			p = Anthropic
		}
		c, rf := checkRequest(p, b, "m", 100)
		if rf != nil {
			if rf.Status() < 400 || rf.Status() > 499 {
				t.Fatalf("refusal %v has status %d", rf, rf.Status())
			}
			return
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("accepted a body encoding/json rejects: %q: %v", b, err)
		}
		if v["model"] != "m" || c.Model != "m" {
			t.Fatalf("accepted model %v in %q", v["model"], b)
		}
		if c.MaxTokens < 1 || c.MaxTokens > 100 {
			t.Fatalf("accepted cap %d in %q", c.MaxTokens, b)
		}
		if s, ok := v["stream"]; ok && s != false {
			t.Fatalf("accepted stream %v in %q", s, b)
		}
	})
}
