package proto_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

func nest(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}

func TestParseJSON(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{name: "R3 surrounding whitespace", in: " \t\r\n{ \"a\" : [ 1 , true ] }\n", want: `{"a":[1,true]}`},
		{name: "R3 empty", in: "", err: "input is empty"},
		{name: "R3 whitespace only", in: " \n", err: "input is empty"},
		{name: "R3 trailing content", in: "true x", err: "unexpected content after the JSON value"},
		{name: "R3 two values", in: "1 2", err: "unexpected content"},
		{name: "R3 form feed is not whitespace", in: "\f1", err: "expected a JSON value"},
		{name: "R2 BOM", in: "\xef\xbb\xbf1", err: "expected a JSON value"},
		{name: "R2 invalid UTF-8", in: "\"a\xffb\"", err: "at byte 2: invalid UTF-8"},
		{name: "R2 UTF-8 encoded surrogate", in: "\"\xed\xa0\x80\"", err: "invalid UTF-8"},
		{name: "R2 overlong", in: "\"\xc0\xaf\"", err: "invalid UTF-8"},
		{name: "R4 trailing comma array", in: "[1,]", err: "expected a JSON value"},
		{name: "R4 trailing comma object", in: `{"a":1,}`, err: "expected a string key"},
		{name: "R4 non-string key", in: `{1:2}`, err: "expected a string key"},
		{name: "R4 truncated literal", in: "tru", err: "invalid literal"},
		{name: "R4 literal prefix", in: "truex", err: "unexpected content"},
		{name: "R4 capitalised literal", in: "True", err: "expected a JSON value"},
		{name: "R5 escapes decode", in: `"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00"`, want: "\"\\\"\\\\/\\b\\f\\n\\r\\tAé😀\""},
		{name: "R5 raw control", in: "\"a\tb\"", err: "control character U+0009 must be escaped"},
		{name: "R5 raw DEL allowed", in: "\"\x7f\"", want: "\"\x7f\""},
		{name: "R5 lone high surrogate", in: `"\ud800"`, err: "lone surrogate"},
		{name: "R5 lone low surrogate", in: `"\udc00"`, err: "lone surrogate"},
		{name: "R5 high then non-low", in: `"\ud800\u0041"`, err: "lone surrogate"},
		{name: "R5 bad escape", in: `"\x"`, err: "invalid escape"},
		{name: "R5 short unicode escape", in: `"\u12"`, err: "expected 4 hex digits"},
		{name: "R5 unterminated", in: `"abc`, err: "unterminated string"},
		{name: "R6 integer bounds", in: "[9007199254740991,-9007199254740991]", want: "[9007199254740991,-9007199254740991]"},
		{name: "R6 beyond max", in: "9007199254740992", err: "outside ±(2^53-1)"},
		{name: "R6 beyond min", in: "-9007199254740992", err: "outside ±(2^53-1)"},
		{name: "R6 very long", in: "123456789012345678901234567890", err: "outside"},
		{name: "R6 fraction", in: "1.0", err: "not an exact integer"},
		{name: "R6 exponent", in: "1e2", err: "not an exact integer"},
		{name: "R6 negative zero", in: "-0", err: "-0 is not accepted"},
		{name: "R6 leading zero", in: "01", err: "leading zeros"},
		{name: "R6 plus sign", in: "+1", err: "expected a JSON value"},
		{name: "R6 bare minus", in: "-", err: "expected a digit"},
		{name: "R6 dot without digits", in: "1.", err: "after the decimal point"},
		{name: "R6 exponent without digits", in: "1e", err: "in the exponent"},
		{name: "R7 duplicate key", in: `{"a":1,"a":2}`, err: "duplicate object key"},
		{name: "R7 duplicate after unescaping", in: `{"a":1,"\u0061":2}`, err: "duplicate object key"},
		{name: "R7 __proto__ is ordinary", in: `{"__proto__":{"x":1},"y":2}`, want: `{"__proto__":{"x":1},"y":2}`},
		{name: "R7 duplicate __proto__", in: `{"__proto__":1,"__proto__":2}`, err: "duplicate object key"},
		{name: "R8 32 levels around a value", in: nest(32, "1"), want: nest(32, "1")},
		{name: "R8 33 levels around a value", in: nest(33, "1"), err: "deeper than 32"},
		{name: "R8 33 nested empty arrays", in: nest(33, ""), want: nest(33, "")},
		{name: "R8 34 nested empty arrays", in: nest(34, ""), err: "deeper than 32"},
		{name: "R1 at limit", in: `"` + strings.Repeat("a", proto.MaxJSONBytes-2) + `"`, want: `"` + strings.Repeat("a", proto.MaxJSONBytes-2) + `"`},
		{name: "R1 over limit", in: `"` + strings.Repeat("a", proto.MaxJSONBytes-1) + `"`, err: "input is 8193 bytes; the maximum is 8192"},
		{name: "R10 no HTML escaping, U+2028 raw", in: `"<&>\u2028\u2029"`, want: "\"<&>\u2028\u2029\""},
		{name: "R10 control escapes lowercase", in: `"\u001F\u0000"`, want: `"\u001f\u0000"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proto.CompactJSON([]byte(tc.in))
			if tc.err != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, proto.ErrJSON), "class: %v", err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

func TestParseJSONErrorsDoNotQuoteInput(t *testing.T) {
	for _, in := range []string{`{"secret-token":1,"secret-token":2}`, `"secret-token`, `[secret-token]`, `1.5e7`} {
		_, err := proto.ParseJSON([]byte(in))
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "secret")
		assert.NotContains(t, err.Error(), "1.5e7")
	}
}

func TestValueAccessors(t *testing.T) {
	v, err := proto.ParseJSON([]byte(`{"a":[true,-3,"s",null]}`))
	require.NoError(t, err)
	require.Equal(t, proto.KindObject, v.Kind())
	require.Equal(t, 1, v.Len())
	m := v.Members()[0]
	assert.Equal(t, "a", m.Key)
	arr := m.Value
	require.Equal(t, 4, arr.Len())
	assert.True(t, arr.Index(0).Bool())
	assert.Equal(t, int64(-3), arr.Index(1).Int())
	assert.Equal(t, "s", arr.Index(2).Str())
	assert.Equal(t, proto.KindNull, arr.Index(3).Kind())
	assert.Equal(t, "null boolean integer string array object", strings.Join([]string{
		proto.KindNull.String(), proto.KindBool.String(), proto.KindInteger.String(),
		proto.KindString.String(), proto.KindArray.String(), proto.KindObject.String()}, " "))
}
