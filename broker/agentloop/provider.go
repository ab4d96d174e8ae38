package agentloop

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// stopKind is a provider's stop reason, normalised.
type stopKind uint8

const (
	stopTools  stopKind = iota + 1 // the model called tools
	stopEnd                        // the model ended its turn (prose)
	stopLength                     // the output cap cut the reply
	stopOther                      // anything else (content filter, refusal, pause)
)

// choiceKind is the tool_choice of one request.
type choiceKind uint8

const (
	choiceAuto   choiceKind = iota + 1 // any tool or none
	choiceAny                          // some tool must be called
	choiceFinish                       // finish must be called
)

func (c choiceKind) String() string {
	switch c {
	case choiceAny:
		return "any"
	case choiceFinish:
		return "finish"
	}
	return "auto"
}

// toolCall is one tool call of a reply.
type toolCall struct {
	id   string
	name string
	args []byte // the arguments as JSON text, nil if unusable
	bad  string // why the arguments are unusable
}

// reply is one provider response, decoded.
type reply struct {
	stop      stopKind
	reason    string // the provider's own stop reason
	text      string
	calls     []toolCall
	inTokens  int64
	outTokens int64
	assistant json.RawMessage // the assistant message for the history
}

// toolResult is the loop's answer to one tool call.
type toolResult struct {
	id      string
	content string
	isError bool
}

// toolDef is one offered tool.
type toolDef struct {
	name        string
	description string
	parameters  json.RawMessage
}

// profile is one provider protocol.
type profile interface {
	path() string
	setHeaders(h http.Header, c *Config)
	initial(system, task string) []json.RawMessage
	request(c *Config, messages []json.RawMessage, tools []toolDef, choice choiceKind, maxTokens int) ([]byte, error)
	parse(body []byte) (reply, error)
	results(rs []toolResult) []json.RawMessage
	userText(s string) json.RawMessage
}

func profileFor(name string) (profile, error) {
	switch name {
	case ProfileOpenAI:
		return openAI{}, nil
	case ProfileAnthropic:
		return anthropic{}, nil
	}
	return nil, fmt.Errorf("unknown profile %q", name)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed shapes of strings and raw JSON are marshalled
	}
	return b
}

// decodeResponse decodes a provider's response body, which must be a JSON
// object in every protocol.
func decodeResponse(body []byte) (*jnode, error) {
	root, err := decodeTree(body)
	if err != nil {
		return nil, err
	}
	if root.kind != jObject {
		return nil, errors.New("response is not an object")
	}
	return root, nil
}

// readUsage reads the response's usage object, whose input and output token
// counts the protocols name in and out.
func (r *reply) readUsage(root *jnode, in, out string) error {
	usage, ok, err := root.field("usage", jObject)
	if err != nil || !ok {
		return errors.New("response has no usage object")
	}
	if r.inTokens, err = usage.tokens(in); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	if r.outTokens, err = usage.tokens(out); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	return nil
}

// openAI speaks POST /v1/chat/completions.
type openAI struct{}

func (openAI) path() string { return "/v1/chat/completions" }

func (openAI) setHeaders(h http.Header, c *Config) {
	h.Set("Authorization", "Bearer "+c.Capability)
}

func (openAI) initial(system, task string) []json.RawMessage {
	return []json.RawMessage{
		mustJSON(map[string]string{"role": "system", "content": system}),
		mustJSON(map[string]string{"role": "user", "content": task}),
	}
}

func (openAI) request(c *Config, messages []json.RawMessage, tools []toolDef, choice choiceKind, maxTokens int) ([]byte, error) {
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type tool struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	ts := make([]tool, len(tools))
	for i, t := range tools {
		ts[i] = tool{Type: "function", Function: fn{Name: t.name, Description: t.description, Parameters: t.parameters}}
	}
	var tc any = "auto"
	switch choice {
	case choiceAny:
		tc = "required"
	case choiceFinish:
		tc = map[string]any{"type": "function", "function": map[string]string{"name": "finish"}}
	}
	return json.Marshal(struct {
		Model               string            `json:"model"`
		Messages            []json.RawMessage `json:"messages"`
		Tools               []tool            `json:"tools"`
		ToolChoice          any               `json:"tool_choice"`
		ParallelToolCalls   bool              `json:"parallel_tool_calls"`
		MaxCompletionTokens int               `json:"max_completion_tokens"`
	}{c.Model, messages, ts, tc, false, maxTokens})
}

func (openAI) parse(body []byte) (reply, error) {
	var r reply
	root, err := decodeResponse(body)
	if err != nil {
		return r, err
	}
	choices, ok, err := root.field("choices", jArray)
	if err != nil || !ok || len(choices.kids) != 1 {
		return r, errors.New("response must have exactly one choice")
	}
	ch := choices.kids[0]
	if ch.kind != jObject {
		return r, errors.New("choice is not an object")
	}
	if r.reason, err = ch.str("finish_reason"); err != nil {
		return r, fmt.Errorf("choice: %w", err)
	}
	switch r.reason {
	case "tool_calls", "function_call":
		r.stop = stopTools
	case "stop":
		r.stop = stopEnd
	case "length":
		r.stop = stopLength
	default:
		r.stop = stopOther
	}
	msg, ok, err := ch.field("message", jObject)
	if err != nil || !ok {
		return r, errors.New("choice has no message object")
	}
	if c, ok, err := msg.field("content", jString, jNull); err != nil {
		return r, fmt.Errorf("message: %w", err)
	} else if ok && c.kind == jString {
		r.text = c.s
	}
	if ref, ok, err := msg.field("refusal", jString, jNull); err != nil {
		return r, fmt.Errorf("message: %w", err)
	} else if ok && ref.kind == jString && r.stop != stopLength {
		r.stop, r.reason = stopOther, "refusal"
	}
	calls, ok, err := msg.field("tool_calls", jArray, jNull)
	if err != nil {
		return r, fmt.Errorf("message: %w", err)
	}
	type fnOut struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type callOut struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fnOut  `json:"function"`
	}
	var echo []callOut
	if ok && calls.kind == jArray {
		for i, c := range calls.kids {
			if c.kind != jObject {
				return r, fmt.Errorf("tool call %d is not an object", i)
			}
			id, err := c.str("id")
			if err != nil {
				return r, fmt.Errorf("tool call %d: %w", i, err)
			}
			if typ, err := c.str("type"); err != nil || typ != "function" {
				return r, fmt.Errorf("tool call %d is not a function call", i)
			}
			f, ok, err := c.field("function", jObject)
			if err != nil || !ok {
				return r, fmt.Errorf("tool call %d has no function object", i)
			}
			name, err := f.str("name")
			if err != nil {
				return r, fmt.Errorf("tool call %d: %w", i, err)
			}
			args, err := f.str("arguments")
			if err != nil {
				return r, fmt.Errorf("tool call %d: %w", i, err)
			}
			r.calls = append(r.calls, toolCall{id: id, name: name, args: []byte(args)})
			echo = append(echo, callOut{ID: id, Type: "function", Function: fnOut{Name: name, Arguments: args}})
		}
	}
	if err := r.readUsage(root, "prompt_tokens", "completion_tokens"); err != nil {
		return r, err
	}
	var content any
	if r.text != "" {
		content = r.text
	}
	r.assistant = mustJSON(struct {
		Role      string    `json:"role"`
		Content   any       `json:"content"`
		ToolCalls []callOut `json:"tool_calls,omitempty"`
	}{"assistant", content, echo})
	return r, nil
}

func (openAI) results(rs []toolResult) []json.RawMessage {
	out := make([]json.RawMessage, len(rs))
	for i, x := range rs {
		out[i] = mustJSON(map[string]string{"role": "tool", "tool_call_id": x.id, "content": x.content})
	}
	return out
}

func (openAI) userText(s string) json.RawMessage {
	return mustJSON(map[string]string{"role": "user", "content": s})
}

// anthropic speaks POST /v1/messages.
type anthropic struct{}

func (anthropic) path() string { return "/v1/messages" }

func (anthropic) setHeaders(h http.Header, c *Config) {
	h.Set("x-api-key", c.Capability)
	h.Set("anthropic-version", c.AnthropicVersion)
}

// anthropicSystem carries the system prompt, which this protocol sends
// outside the messages; initial stores it as the first "message" and
// request takes it back out.
type anthropicSystem struct {
	System string `json:"system"`
}

func (anthropic) initial(system, task string) []json.RawMessage {
	return []json.RawMessage{
		mustJSON(anthropicSystem{System: system}),
		mustJSON(map[string]string{"role": "user", "content": task}),
	}
}

func (anthropic) request(c *Config, messages []json.RawMessage, tools []toolDef, choice choiceKind, maxTokens int) ([]byte, error) {
	var sys anthropicSystem
	if len(messages) == 0 || json.Unmarshal(messages[0], &sys) != nil {
		return nil, errors.New("the history has no system prompt")
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	ts := make([]tool, len(tools))
	for i, t := range tools {
		ts[i] = tool{Name: t.name, Description: t.description, InputSchema: t.parameters}
	}
	tc := map[string]any{"type": "auto", "disable_parallel_tool_use": true}
	switch choice {
	case choiceAny:
		tc["type"] = "any"
	case choiceFinish:
		tc["type"], tc["name"] = "tool", "finish"
	}
	return json.Marshal(struct {
		Model      string            `json:"model"`
		System     string            `json:"system"`
		Messages   []json.RawMessage `json:"messages"`
		Tools      []tool            `json:"tools"`
		ToolChoice any               `json:"tool_choice"`
		MaxTokens  int               `json:"max_tokens"`
	}{c.Model, sys.System, messages[1:], ts, tc, maxTokens})
}

func (anthropic) parse(body []byte) (reply, error) {
	var r reply
	root, err := decodeResponse(body)
	if err != nil {
		return r, err
	}
	if typ, err := root.str("type"); err != nil || typ != "message" {
		return r, errors.New("response is not a message")
	}
	if role, err := root.str("role"); err != nil || role != "assistant" {
		return r, errors.New("response is not an assistant message")
	}
	if r.reason, err = root.str("stop_reason"); err != nil {
		return r, err
	}
	switch r.reason {
	case "tool_use":
		r.stop = stopTools
	case "end_turn", "stop_sequence":
		r.stop = stopEnd
	case "max_tokens", "model_context_window_exceeded":
		r.stop = stopLength
	default:
		r.stop = stopOther
	}
	content, ok, err := root.field("content", jArray)
	if err != nil || !ok {
		return r, errors.New("response has no content array")
	}
	var echo []json.RawMessage
	for i, b := range content.kids {
		if b.kind != jObject {
			return r, fmt.Errorf("content block %d is not an object", i)
		}
		typ, err := b.str("type")
		if err != nil {
			return r, fmt.Errorf("content block %d: %w", i, err)
		}
		switch typ {
		case "text":
			t, err := b.str("text")
			if err != nil {
				return r, fmt.Errorf("content block %d: %w", i, err)
			}
			r.text += t
			echo = append(echo, mustJSON(map[string]string{"type": "text", "text": t}))
		case "tool_use":
			id, err := b.str("id")
			if err != nil {
				return r, fmt.Errorf("content block %d: %w", i, err)
			}
			name, err := b.str("name")
			if err != nil {
				return r, fmt.Errorf("content block %d: %w", i, err)
			}
			in, ok := b.get("input")
			if !ok {
				return r, fmt.Errorf("content block %d has no input", i)
			}
			raw := in.appendJSON(nil)
			call := toolCall{id: id, name: name, args: raw}
			if in.kind != jObject {
				call.args, call.bad = nil, "the input is not a JSON object"
			}
			r.calls = append(r.calls, call)
			echo = append(echo, mustJSON(struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			}{"tool_use", id, name, raw}))
		default:
			// Thinking and other blocks are not echoed: the loop never asks
			// for them, and echoing them would need their signatures.
		}
	}
	if err := r.readUsage(root, "input_tokens", "output_tokens"); err != nil {
		return r, err
	}
	if len(echo) == 0 {
		echo = append(echo, mustJSON(map[string]string{"type": "text", "text": "(no content)"}))
	}
	r.assistant = mustJSON(struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}{"assistant", echo})
	return r, nil
}

func (anthropic) results(rs []toolResult) []json.RawMessage {
	type block struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	bs := make([]block, len(rs))
	for i, x := range rs {
		bs[i] = block{"tool_result", x.id, x.content, x.isError}
	}
	return []json.RawMessage{mustJSON(struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}{"user", bs})}
}

func (anthropic) userText(s string) json.RawMessage {
	return mustJSON(map[string]string{"role": "user", "content": s})
}
