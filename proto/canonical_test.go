package proto_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

func TestCheckResult(t *testing.T) {
	obj := `{"type":"object","fields":{"b":{"type":"boolean"},"a":{"type":"integer","minimum":-5,"maximum":5}}}`
	union := `{"type":"union","variants":{"none":{"type":"const","value":null},"n":{"type":"integer","minimum":0,"maximum":9}}}`
	cases := []struct{ name, schema, in, want, err string }{
		{"R36 const written from the schema", `{"type":"const","value":"a/b"}`, `"a\/b"`, `"a/b"`, ""},
		{"R29 const mismatch", `{"type":"const","value":1}`, `2`, "", "value is not the schema's constant"},
		{"R29 const no coercion", `{"type":"const","value":1}`, `"1"`, "", "expected the constant (a integer), got string"},
		{"R30 boolean", boolean, ` false `, `false`, ""},
		{"R29 const true", `{"type":"const","value":true}`, `true`, `true`, ""},
		{"R29 const false mismatch", `{"type":"const","value":true}`, `false`, "", "not the schema's constant"},
		{"R29 const null", `{"type":"const","value":null}`, ` null `, `null`, ""},
		{"R29 const null truncated", `{"type":"const","value":null}`, `nul`, "", "invalid literal"},
		{"R29 const negative", `{"type":"const","value":-7}`, `-7`, `-7`, ""},
		{"R29 const integer as -0", `{"type":"const","value":0}`, `-0`, "", "-0 is not accepted"},
		{"R29 enum booleans", `{"type":"enum","values":[false]}`, `false`, `false`, ""},
		{"R29 enum booleans mismatch", `{"type":"enum","values":[false]}`, `true`, "", "not one of the 1 enum values"},
		{"R29 enum integers", `{"type":"enum","values":[-1,0,1]}`, `0`, `0`, ""},
		{"R29 enum integers leading zero", `{"type":"enum","values":[-1,0,1]}`, `00`, "", "leading zeros"},
		{"R29 enum integer with exponent", `{"type":"enum","values":[-1,0,1]}`, `1e0`, "", "not an exact integer"},
		{"R29 enum integer for array", `{"type":"enum","values":[-1,0,1]}`, `[1]`, "", "got array"},
		{"R29 enum escaped member", `{"type":"enum","values":["a\\b","c"]}`, `"a\\b"`, `"a\\b"`, ""},
		{"R29 enum string with raw control", `{"type":"enum","values":["ab"]}`, "\"a\tb\"", "", "control character"},
		{"R30 boolean truncated", boolean, `fals`, "", "invalid literal"},
		{"R31 integer huge", `{"type":"integer","minimum":0,"maximum":5}`, `12345678901234567`, "", "outside ±(2^53-1)"},
		{"R30 boolean no coercion", boolean, `0`, "", "expected boolean, got integer"},
		{"R29 enum member", `{"type":"enum","values":["x","y"]}`, `"\u0079"`, `"y"`, ""},
		{"R29 enum non-member", `{"type":"enum","values":["x","y"]}`, `"z"`, "", "not one of the 2 enum values"},
		{"R29 enum null", `{"type":"enum","values":[null]}`, `null`, `null`, ""},
		{"R31 integer bounds", `{"type":"integer","minimum":-5,"maximum":5}`, `-5`, `-5`, ""},
		{"R31 integer below", `{"type":"integer","minimum":-5,"maximum":5}`, `-6`, "", "outside the range -5..5"},
		{"R31 integer 1.0 rejected", `{"type":"integer","minimum":0,"maximum":5}`, `1.0`, "", "not an exact integer"},
		{"R31 integer -0 rejected", `{"type":"integer","minimum":0,"maximum":5}`, `-0`, "", "-0 is not accepted"},
		{"R32 object declared order", obj, `{"a":-1,"b":true}`, `{"b":true,"a":-1}`, ""},
		{"R32 object missing field", obj, `{"a":1}`, "", `at $: missing field "b"`},
		{"R32 object extra key", obj, `{"a":1,"b":true,"c":0}`, "", "object has 3 keys; the schema declares exactly 2 fields"},
		{"R32 object __proto__ extra", obj, `{"a":1,"b":true,"__proto__":0}`, "", "object has 3 keys"},
		{"R32 nested path", obj, `{"a":9,"b":true}`, "", "at $.a: integer is outside"},
		{"R33 tuple", `{"type":"tuple","items":[{"type":"boolean"},{"type":"const","value":"k"}]}`, `[true,"k"]`, `[true,"k"]`, ""},
		{"R33 tuple length", `{"type":"tuple","items":[{"type":"boolean"}]}`, `[true,true]`, "", "expected an array of length 1, got length 2"},
		{"R33 array", arrays(1, 3, boolean), `[true, false ,true]`, `[true,false,true]`, ""},
		{"R33 array element path", arrays(1, 3, boolean), `[true,false,1]`, "", "at $[2]: expected boolean"},
		{"R33 empty array", arrays(1, 0, boolean), `[]`, `[]`, ""},
		{"R34 union tag first", union, `{"value":3,"tag":"n"}`, `{"tag":"n","value":3}`, ""},
		{"R34 union value first, nested", `{"type":"union","variants":{"p":{"type":"tuple","items":[{"type":"boolean"},` + union + `]}}}`,
			`{"value":[false,{"value":2,"tag":"n"}],"tag":"p"}`, `{"tag":"p","value":[false,{"tag":"n","value":2}]}`, ""},
		{"R34 union value first with string", `{"type":"union","variants":{"s":{"type":"enum","values":["}\",{"]}}}`,
			`{"value":"}\",{","tag":"s"}`, `{"tag":"s","value":"}\",{"}`, ""},
		{"R34 union value first, spaced", `{"type":"union","variants":{"p":{"type":"tuple","items":[{"type":"boolean"}]}}}`,
			"{ \"value\" : [ true ] \n , \"tag\" : \"p\" }", `{"tag":"p","value":[true]}`, ""},
		{"R34 union value first, bad value", union, `{"value":10,"tag":"n"}`, "", "at $.value: integer is outside"},
		{"R34 union value first, no tag", union, `{"value":1}`, "", `exactly the keys "tag" and "value"`},
		{"R32 escaped keys", obj, `{"\u0061":1,"\u0062":true}`, `{"b":true,"a":1}`, ""},
		{"R34 union const", union, `{"tag":"none","value":null}`, `{"tag":"none","value":null}`, ""},
		{"R34 union unknown tag", union, `{"tag":"x","value":1}`, "", "at $.tag: union tag is not one of the 2 declared tags"},
		{"R34 union extra key", union, `{"tag":"n","value":1,"x":1}`, "", `exactly the keys "tag" and "value"`},
		{"R34 union tag type", union, `{"tag":1,"value":1}`, "", "union tag must be a string"},
		{"R34 union value path", union, `{"tag":"n","value":10}`, "", "at $.value: integer is outside"},
		{"R37 escaping", `{"type":"enum","values":["<\"\\/>\u2028é"]}`, `"<\"\\\/>` + "\u2028" + `\u00e9"`, "\"<\\\"\\\\/>\u2028é\"", ""},
		{"R28 trailing content", boolean, `true true`, "", "unexpected content"},
		{"R28 duplicate key", obj, `{"a":1,"a":1,"b":true}`, "", "duplicate object key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := proto.ParseSchema([]byte(tc.schema))
			require.NoError(t, err)
			got, err := s.CheckResult([]byte(tc.in))
			if tc.err != "" {
				require.Error(t, err)
				_, streamOK, _, _ := s.CheckResultPaths([]byte(tc.in))
				assert.False(t, streamOK, "fast path accepted a bad result")
				assert.True(t, errors.Is(err, proto.ErrJSON) || errors.Is(err, proto.ErrValue), "class: %v", err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			stream, streamOK, tree, treeErr := s.CheckResultPaths([]byte(tc.in))
			require.NoError(t, treeErr)
			assert.Equal(t, tc.want, string(tree))
			assert.True(t, streamOK, "fast path declined")
			assert.Equal(t, tc.want, string(stream))
			env := proto.OKEnvelope(got)
			assert.Equal(t, `{"status":"ok","result":`+tc.want+`}`, string(env))
		})
	}
}

func TestCheckResultSizeLimit(t *testing.T) {
	s, err := proto.ParseSchema([]byte(boolean))
	require.NoError(t, err)
	pad := make([]byte, proto.MaxResultBytes-4)
	for i := range pad {
		pad[i] = ' '
	}
	got, err := s.CheckResult(append([]byte("true"), pad...))
	require.NoError(t, err)
	assert.Equal(t, "true", string(got))
	_, err = s.CheckResult(append([]byte("true "), pad...))
	require.ErrorContains(t, err, "result is 8193 bytes; the maximum is 8192")
	assert.True(t, errors.Is(err, proto.ErrJSON))
}

func TestCheckResultErrorsDoNotQuoteContent(t *testing.T) {
	s, err := proto.ParseSchema([]byte(`{"type":"object","fields":{"k":{"type":"enum","values":["a","b"]}}}`))
	require.NoError(t, err)
	for _, in := range []string{`{"k":"hunter2"}`, `{"hunter2":"a"}`, `{"k":"a","hunter2":1}`, `{"k":["hunter2"]}`} {
		_, err := s.CheckResult([]byte(in))
		require.Error(t, err, in)
		assert.NotContains(t, err.Error(), "hunter2")
	}
}

func TestAppendCanonicalKeepsDst(t *testing.T) {
	s, err := proto.ParseSchema([]byte(boolean))
	require.NoError(t, err)
	v, err := proto.ParseJSON([]byte(`1`))
	require.NoError(t, err)
	dst, err := s.AppendCanonical([]byte("prefix"), v)
	require.Error(t, err)
	assert.Equal(t, "prefix", string(dst))
	assert.ErrorIs(t, s.Validate(v), proto.ErrValue)
}

func TestEnvelopes(t *testing.T) {
	assert.Equal(t, `{"status":"error"}`, proto.ErrorEnvelope)
	assert.Equal(t, `{"status":"ok","result":true}`, string(proto.OKEnvelope([]byte("true"))))
}

func TestSchemaConcurrentUse(t *testing.T) {
	s, err := proto.ParseSchema([]byte(`{"type":"object","fields":{"a":{"type":"enum","values":["x","y"]},"n":{"type":"integer","minimum":0,"maximum":9}}}`))
	require.NoError(t, err)
	done := make(chan []byte)
	for i := 0; i < 8; i++ {
		go func() {
			var last []byte
			for j := 0; j < 200; j++ {
				last, _ = s.CheckResult([]byte(`{"n":3,"a":"y"}`))
				_ = s.Cardinality().String()
				_ = s.Compact()
			}
			done <- last
		}()
	}
	for i := 0; i < 8; i++ {
		assert.Equal(t, `{"a":"y","n":3}`, string(<-done))
	}
}
