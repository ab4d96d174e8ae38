package agentloop

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

func TestParseConfig(t *testing.T) {
	good := testConfig(ProfileAnthropic, "http://169.254.77.1:8080")
	gb, err := json.Marshal(good)
	require.NoError(t, err)
	got, err := ParseConfig(gb)
	require.NoError(t, err)
	assert.Equal(t, good, got, "the contract's field names round-trip through encoding/json")

	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		require.NoError(t, json.Unmarshal(gb, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return string(b)
	}
	cases := []struct {
		name, text, want string
	}{
		{"unknown key", edit(func(m map[string]any) { m["tools"] = "shell" }), "unknown key"},
		{"missing model", edit(func(m map[string]any) { delete(m, "model") }), "model is missing"},
		{"missing deadline", edit(func(m map[string]any) { delete(m, "deadlineUnixMilli") }), "deadlineUnixMilli is missing"},
		{"wrong type", edit(func(m map[string]any) { m["maxModelRequests"] = "8" }), "must be an integer"},
		{"fraction", strings.Replace(string(gb), `"maxModelTokens":1024`, `"maxModelTokens":1024.5`, 1), "not an exact integer"},
		{"duplicate key", strings.Replace(string(gb), `{`, `{"model":"other",`, 1), "duplicate"},
		{"case variant key", strings.Replace(string(gb), `"model"`, `"Model"`, 1), "unknown key"},
		{"unknown profile", edit(func(m map[string]any) { m["profile"] = "gemini" }), "unknown profile"},
		{"zero requests", edit(func(m map[string]any) { m["maxModelRequests"] = 0 }), "maxModelRequests"},
		{"too many requests", edit(func(m map[string]any) { m["maxModelRequests"] = 65 }), "maxModelRequests"},
		{"zero tokens", edit(func(m map[string]any) { m["maxModelTokens"] = 0 }), "maxModelTokens"},
		{"output over 8192", edit(func(m map[string]any) { m["maxOutputBytes"] = 8193 }), "maxOutputBytes"},
		{"negative bound", edit(func(m map[string]any) { m["maxOutputBytes"] = -1 }), "out of range"},
		{"no deadline", edit(func(m map[string]any) { m["deadlineUnixMilli"] = 0 }), "deadlineUnixMilli"},
		{"anthropic needs a version", edit(func(m map[string]any) { delete(m, "anthropicVersion") }), "anthropicVersion"},
		{"empty capability", edit(func(m map[string]any) { m["capability"] = "" }), "capability"},
		{"capability with a newline", edit(func(m map[string]any) { m["capability"] = "awf-cap-x\r\nX-Evil: 1" }), "capability"},
		{"endpoint with a path", edit(func(m map[string]any) { m["endpoint"] = "http://169.254.77.1:8080/v1" }), "endpoint"},
		{"endpoint with user info", edit(func(m map[string]any) { m["endpoint"] = "http://u:p@169.254.77.1" }), "endpoint"},
		{"endpoint with a query", edit(func(m map[string]any) { m["endpoint"] = "http://169.254.77.1/?a=1" }), "endpoint"},
		{"endpoint not http", edit(func(m map[string]any) { m["endpoint"] = "unix:///run/x.sock" }), "endpoint"},
		{"model with a control character", edit(func(m map[string]any) { m["model"] = "a\tb" }), "model"},
		{"not an object", `[1]`, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.text))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	t.Run("openai needs no anthropicVersion", func(t *testing.T) {
		c := testConfig(ProfileOpenAI, "http://169.254.77.1:8080")
		c.AnthropicVersion = ""
		b, _ := json.Marshal(c)
		text := strings.Replace(string(b), `,"anthropicVersion":""`, ``, 1)
		_, err := ParseConfig([]byte(text))
		assert.NoError(t, err)
	})
}

func TestFinishParameters(t *testing.T) {
	cases := []struct{ name, schema, want string }{
		{"const", `{"type":"const","value":null}`, `{"const":null}`},
		{"boolean", `{"type":"boolean"}`, `{"type":"boolean"}`},
		{"enum", `{"type":"enum","values":["a","b\"c"]}`, `{"enum":["a","b\"c"]}`},
		{"integer", `{"type":"integer","minimum":-9007199254740991,"maximum":3}`, `{"type":"integer","minimum":-9007199254740991,"maximum":3}`},
		{"object", `{"type":"object","fields":{"z":{"type":"boolean"},"a":{"type":"const","value":1}}}`,
			`{"type":"object","properties":{"z":{"type":"boolean"},"a":{"const":1}},"required":["z","a"],"additionalProperties":false}`},
		{"tuple", `{"type":"tuple","items":[{"type":"boolean"},{"type":"enum","values":[1,2]}]}`,
			`{"type":"array","prefixItems":[{"type":"boolean"},{"enum":[1,2]}],"items":false,"minItems":2,"maxItems":2}`},
		{"array", `{"type":"array","items":{"type":"boolean"},"length":0}`,
			`{"type":"array","items":{"type":"boolean"},"minItems":0,"maxItems":0}`},
		{"union", `{"type":"union","variants":{"a":{"type":"boolean"},"b":{"type":"const","value":"x"}}}`,
			`{"oneOf":[{"type":"object","properties":{"tag":{"const":"a"},"value":{"type":"boolean"}},"required":["tag","value"],"additionalProperties":false},` +
				`{"type":"object","properties":{"tag":{"const":"b"},"value":{"const":"x"}},"required":["tag","value"],"additionalProperties":false}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := proto.ParseSchema([]byte(c.schema))
			require.NoError(t, err)
			got, err := FinishParameters(s)
			require.NoError(t, err)
			assert.True(t, json.Valid(got))
			assert.Equal(t, `{"type":"object","properties":{"result":`+c.want+`},"required":["result"],"additionalProperties":false}`, string(got))
		})
	}
	t.Run("the deepest and largest schemas compile to valid JSON", func(t *testing.T) {
		deep := `{"type":"boolean"}`
		for range proto.MaxSchemaDepth {
			deep = `{"type":"array","items":` + deep + `,"length":2}`
		}
		s, err := proto.ParseSchema([]byte(deep))
		require.NoError(t, err)
		got, err := FinishParameters(s)
		require.NoError(t, err)
		assert.True(t, json.Valid(got))
	})
}
