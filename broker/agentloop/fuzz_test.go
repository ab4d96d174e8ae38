package agentloop

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/awf-project/awf/proto"
)

// Seeds shared by the response fuzzers: the fake provider's shapes, the
// edge cases the decoder refuses, and near misses.
var openAISeeds = []string{
	`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"finish","arguments":"{\"result\":true}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`,
	`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"prose","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
	`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"list_files","arguments":"{\"path\":"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
	`{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
	`{"choices":[{"message":{},"finish_reason":"stop"}],"choices":[]}`,
	`{"Choices":[],"choices":[]}`,
	`{"choices":[{"message":{"content":1},"finish_reason":"stop"}],"usage":{"prompt_tokens":1.5,"completion_tokens":-1}}`,
	`{"choices":[{"message":{"content":"a"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":1,"completion_tokens":1}} x`,
	"{\"choices\":\"\xff\"}",
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

var anthropicSeeds = []string{
	`{"id":"m","type":"message","role":"assistant","model":"x","content":[{"type":"tool_use","id":"t1","name":"finish","input":{"result":true}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":13,"output_tokens":5}}`,
	`{"type":"message","role":"assistant","content":[{"type":"text","text":"prose"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`,
	`{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"finish","input":"result=true"}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`,
	`{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"tool_use","id":"t","name":"search","input":{"pattern":"a","path":"."}}],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":1,"cache_read_input_tokens":0}}`,
	`{"type":"message","role":"assistant","content":[],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`,
	`{"type":"message","Type":"message"}`,
	`{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1e400}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`,
	`{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":"\ud800"}}],"stop_reason":"pause_turn","usage":{"input_tokens":1,"output_tokens":1}}`,
}

// checkReply is what every accepted reply must satisfy: its assistant
// message is valid JSON, every usable call's arguments are valid JSON, and
// the token counts are in range.
func checkReply(t *testing.T, r reply) {
	t.Helper()
	if !json.Valid(r.assistant) {
		t.Fatalf("assistant message is not JSON: %q", r.assistant)
	}
	if r.stop < stopTools || r.stop > stopOther {
		t.Fatalf("stop kind %d", r.stop)
	}
	if r.inTokens < 0 || r.outTokens < 0 {
		t.Fatalf("negative usage")
	}
	for _, c := range r.calls {
		if c.bad == "" && c.args == nil {
			t.Fatalf("call %q has neither arguments nor a reason", c.name)
		}
	}
}

// FuzzOpenAIResponse: decoding a Chat Completions body never panics, and an
// accepted one yields a well-formed reply.
func FuzzOpenAIResponse(f *testing.F) {
	for _, s := range openAISeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := openAI{}.parse(b)
		if err == nil {
			checkReply(t, r)
		}
	})
}

// FuzzAnthropicResponse: the same for a Messages body.
func FuzzAnthropicResponse(f *testing.F) {
	for _, s := range anthropicSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := anthropic{}.parse(b)
		if err == nil {
			checkReply(t, r)
			for _, c := range r.calls {
				if c.bad == "" && !json.Valid(c.args) {
					t.Fatalf("re-serialised input is not JSON: %q", c.args)
				}
			}
		}
	})
}

// FuzzDecodeTree: the strict decoder agrees with encoding/json on validity
// (it may refuse more, never accept less strict input), and its
// re-serialisation is valid JSON that decodes to the same tree.
func FuzzDecodeTree(f *testing.F) {
	for _, s := range append(append([]string{`{"a":[1,2.5,-3e2,true,null,"x"]}`, `"\u00e9"`, `{"a":1,"A":2}`}, openAISeeds...), anthropicSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeTree(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		out := n.appendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("re-serialisation %q is not JSON", out)
		}
		m, err := decodeTree(out)
		if err != nil {
			t.Fatalf("re-serialisation does not decode: %v", err)
		}
		if string(m.appendJSON(nil)) != string(out) {
			t.Fatalf("re-serialisation is not stable")
		}
	})
}

// FuzzToolArgs: decoding and picking a call's arguments never panics, and
// accepted arguments are strict JSON objects with only the allowed keys.
func FuzzToolArgs(f *testing.F) {
	for _, s := range []string{
		`{"path":"."}`, `{"path":"src/../x"}`, `{"pattern":"needle","path":"src"}`, `{"pattern":"x"}`,
		`{"result":{"tag":"a","value":[1,2]}}`, `{"path":1}`, `{"path":".","path":"x"}`, `{"path":"\u0000"}`,
		`{"result":1.5}`, `"result"`, `{"path":".","extra":true}`, `{`, "{\"path\":\"\xff\"}", ``,
	} {
		f.Add([]byte(s))
	}
	schema, err := proto.ParseSchema([]byte(`{"type":"union","variants":{"a":{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"length":2},"b":{"type":"boolean"}}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := toolArgs(toolCall{name: "x", args: b})
		if err != nil {
			var te *toolError
			if !errors.As(err, &te) {
				t.Fatalf("argument error %v is not a tool error", err)
			}
			return
		}
		if vs, err := a.strings("pattern", "path?"); err == nil {
			if len(vs) != 2 || vs[0] == "" && !strings.Contains(string(b), `"pattern"`) {
				t.Fatalf("pattern accepted without being given: %q", b)
			}
		}
		if vs, err := a.only("result"); err == nil {
			if canon, err := schema.AppendCanonical(nil, vs[0]); err == nil {
				if _, err := schema.CheckResult(canon); err != nil {
					t.Fatalf("canonical result %q does not check: %v", canon, err)
				}
			}
		}
	})
}

// FuzzParseConfig: the config parser never panics, and a config it accepts
// validates and round-trips through encoding/json.
func FuzzParseConfig(f *testing.F) {
	good, _ := json.Marshal(Config{Profile: "openai", Model: "m", Endpoint: "http://169.254.77.1:8080",
		Capability: "awf-cap-x", MaxModelRequests: 8, MaxModelTokens: 1024, MaxOutputBytes: 8192, DeadlineUnixMilli: 1})
	f.Add(good)
	f.Add([]byte(strings.Replace(string(good), `"openai"`, `"anthropic"`, 1)))
	f.Add([]byte(`{"profile":"openai","profile":"anthropic"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		rb, _ := json.Marshal(c)
		c2, err := ParseConfig(rb)
		if err != nil || c2 != c {
			t.Fatalf("round trip: %v", err)
		}
	})
}
