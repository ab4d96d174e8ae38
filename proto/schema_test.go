package proto_test

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/proto"
)

// arrays wraps inner in n arrays of the given length.
func arrays(n, length int, inner string) string {
	for i := 0; i < n; i++ {
		inner = fmt.Sprintf(`{"type":"array","length":%d,"items":%s}`, length, inner)
	}
	return inner
}

func fields(n int, inner string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"f%d":%s`, i, inner)
	}
	return `{"type":"object","fields":{` + strings.Join(parts, ",") + `}}`
}

const boolean = `{"type":"boolean"}`

func TestParseSchemaValid(t *testing.T) {
	cases := []struct {
		name, schema, card string
		charge             int64
	}{
		{"const", `{"type":"const","value":42}`, "1", 4},
		{"boolean", boolean, "2", 5},
		{"enum of 4", `{"type":"enum","values":["MIT","Apache-2.0","GPL-3.0","unknown"]}`, "4", 6},
		{"integer 0..255", `{"type":"integer","minimum":0,"maximum":255}`, "256", 12},
		{"integer full range", `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`, "18014398509481983", 58},
		{"array of 64 booleans", arrays(1, 64, boolean), "18446744073709551616", 68},
		{"array of length 0", arrays(1, 0, boolean), "1", 4},
		{"object product", `{"type":"object","fields":{"a":{"type":"boolean"},"b":{"type":"enum","values":[1,2,3]}}}`, "6", 7},
		{"tuple product", `{"type":"tuple","items":[{"type":"boolean"},{"type":"const","value":null}]}`, "2", 5},
		{"union sum", `{"type":"union","variants":{"a":{"type":"boolean"},"b":{"type":"boolean"}}}`, "4", 6},
		{"depth 6", arrays(6, 1, boolean), "2", 5},
		{"exactly 2^1024", arrays(1, 64, arrays(1, 16, boolean)), new(big.Int).Lsh(big.NewInt(1), 1024).String(), 1028},
		{"2^1024+1 is capped", `{"type":"union","variants":{"a":` + arrays(1, 64, arrays(1, 16, boolean)) + `,"b":{"type":"const","value":1}}}`,
			new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 1024), big.NewInt(1)).String(), 1029},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := proto.ParseSchema([]byte(tc.schema))
			require.NoError(t, err)
			require.NotNil(t, s.Cardinality())
			assert.Equal(t, tc.card, s.Cardinality().String())
			assert.Equal(t, tc.charge, s.ChargeBits())
			assert.Equal(t, tc.charge == proto.MaxChargeBits, s.ChargeCapped())
			assert.Equal(t, tc.schema, string(s.Compact()))
		})
	}
}

func TestParseSchemaAstronomical(t *testing.T) {
	// 4-deep length-64 arrays: 2^16777216 values, never materialised.
	s, err := proto.ParseSchema([]byte(arrays(4, 64, boolean)))
	require.NoError(t, err)
	assert.Nil(t, s.Cardinality())
	assert.Equal(t, float64(1<<24), s.CardinalityLog2())
	assert.Equal(t, int64(proto.MaxChargeBits), s.ChargeBits())
	assert.True(t, s.ChargeCapped())
	// 6-deep arrays around the full integer range: 54 * 64^6 bits.
	s, err = proto.ParseSchema([]byte(arrays(6, 64, `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`)))
	require.NoError(t, err)
	assert.Nil(t, s.Cardinality())
	assert.Equal(t, int64(1029), s.ChargeBits())
}

func TestParseSchemaInvalid(t *testing.T) {
	long := strings.Repeat("x", 65)
	cases := []struct{ name, schema, err string }{
		{"operator message for a bad field name", `{"type":"object","fields":{"9x":{"type":"boolean"}}}`,
			`invalid schema: at $.fields: field name "9x" must start with a letter`},
		{"depth 7", arrays(7, 1, boolean), "at $.items.items.items.items.items.items.items: schema is nested deeper than the maximum depth of 6"},
		{"not an object", `[]`, "a schema node must be a JSON object, got array"},
		{"no type", `{}`, `schema node has no "type"`},
		{"type not a string", `{"type":1}`, `at $.type: "type" must be a string`},
		{"unknown type", `{"type":"string"}`, `unknown schema type "string"`},
		{"extra key", `{"type":"boolean","x":1}`, `boolean schema must have exactly the keys "type"; unexpected key "x"`},
		{"__proto__ is an ordinary extra key", `{"type":"boolean","__proto__":{}}`, `unexpected key "__proto__"`},
		{"missing key", `{"type":"integer","minimum":0}`, `missing key "maximum"`},
		{"const literal object", `{"type":"const","value":{}}`, "at $.value: a literal must be"},
		{"literal 65 bytes", `{"type":"const","value":"` + long + `"}`, "string literal is 65 UTF-8 bytes; the maximum is 64"},
		{"literal control", `{"type":"const","value":"\u007f"}`, "control character U+007F"},
		{"enum empty", `{"type":"enum","values":[]}`, "enum values must not be empty"},
		{"enum mixed", `{"type":"enum","values":[1,"1"]}`, "at $.values[1]: enum values must all have one JSON type"},
		{"enum duplicate", `{"type":"enum","values":["a","b","\u0061"]}`, "at $.values[2]: enum value duplicates value 0"},
		{"integer reversed", `{"type":"integer","minimum":2,"maximum":1}`, "maximum 1 is less than minimum 2"},
		{"integer not exact", `{"type":"integer","minimum":0,"maximum":1e2}`, "not an exact integer"},
		{"object 17 fields", fields(17, boolean), "object schema declares 17 fields; the maximum is 16"},
		{"object no fields", `{"type":"object","fields":{}}`, "at least one"},
		{"field name too long", `{"type":"object","fields":{"a` + strings.Repeat("b", 64) + `":{"type":"boolean"}}}`, "65 bytes long; the maximum is 64"},
		{"field name bad char", `{"type":"object","fields":{"a-b":{"type":"boolean"}}}`, `field name "a-b" may contain only`},
		{"union tag", `{"type":"union","variants":{"_x":{"type":"boolean"}}}`, `union tag "_x" must start with a letter`},
		{"array 65", arrays(1, 65, boolean), "array length 65 is outside 0..64"},
		{"array -1", arrays(1, -1, boolean), "array length -1 is outside 0..64"},
		{"nested error path", `{"type":"object","fields":{"a":{"type":"tuple","items":[{"type":"boolean"},{"type":"enum","values":[]}]}}}`,
			"at $.fields.a.items[1].values: enum values must not be empty"},
		{"not JSON", `{"type":"boolean"`, "invalid schema: malformed JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proto.ParseSchema([]byte(tc.schema))
			require.Error(t, err)
			assert.True(t, errors.Is(err, proto.ErrSchema), "class: %v", err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestParseSchemaNodeAndSizeLimits(t *testing.T) {
	// An object of 16 tuples of 3 booleans = 1 + 16*4 = 65 nodes; with the
	// last tuple holding 2 booleans it is 64.
	tuple := `{"type":"tuple","items":[` + boolean + `,` + boolean + `,` + boolean + `]}`
	over := fields(16, tuple)
	_, err := proto.ParseSchema([]byte(over))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at $.fields.f15.items[2]: schema has more than the maximum of 64 nodes")
	at := strings.Replace(over, `"f15":`+tuple, `"f15":{"type":"tuple","items":[`+boolean+`,`+boolean+`]}`, 1)
	_, err = proto.ParseSchema([]byte(at))
	require.NoError(t, err)

	// Size: a string enum padded to exactly 4096 compact bytes, then 4097.
	for _, extra := range []int{0, 1} {
		prefix, suffix := `{"type":"enum","values":[`, `]}`
		var vals []string
		size := len(prefix) + len(suffix)
		for i := 0; size+67 <= proto.MaxSchemaBytes; i++ {
			v := fmt.Sprintf(`"%064d"`, i)
			vals = append(vals, v)
			size += len(v) + 1
		}
		size-- // no comma before the first
		last := fmt.Sprintf(`"%s"`, strings.Repeat("z", proto.MaxSchemaBytes-size-3+extra))
		vals = append(vals, last)
		text := prefix + strings.Join(vals, ",") + suffix
		require.Equal(t, proto.MaxSchemaBytes+extra, len(text))
		_, err := proto.ParseSchema([]byte(text))
		if extra == 0 {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, "the schema is 4097 bytes in compact form; the maximum is 4096")
		}
	}
	// Whitespace does not count: the same 4096-byte schema pretty-printed.
	_, err = proto.ParseSchema([]byte(strings.ReplaceAll(fields(16, boolean), ",", " ,\n ")))
	require.NoError(t, err)
}

func TestChargeForCardinality(t *testing.T) {
	two := big.NewInt(2)
	for _, tc := range []struct {
		card *big.Int
		want int64
	}{
		{big.NewInt(1), 4}, {big.NewInt(2), 5}, {big.NewInt(3), 6}, {big.NewInt(4), 6}, {big.NewInt(5), 7},
		{new(big.Int).Exp(two, big.NewInt(100), nil), 104},
		{new(big.Int).Exp(two, big.NewInt(1024), nil), 1028},
		{new(big.Int).Exp(two, big.NewInt(5000), nil), 1029},
	} {
		assert.Equal(t, tc.want, proto.ChargeForCardinality(tc.card), tc.card.String())
	}
	assert.Equal(t, int64(0), proto.CeilLog2(big.NewInt(1)))
	assert.Equal(t, int64(10), proto.CeilLog2(big.NewInt(1000)))
}

func TestParseSchemaWideNestingHitsNodeLimit(t *testing.T) {
	// Every level declares 16 children before the first is checked: the
	// declared lists far exceed 64 entries long before 65 nodes exist.
	inner := boolean
	for i := 0; i < 6; i++ {
		items := make([]string, 16)
		for j := range items {
			items[j] = boolean
		}
		items[0] = inner
		inner = `{"type":"tuple","items":[` + strings.Join(items, ",") + `]}`
	}
	_, err := proto.ParseSchema([]byte(inner))
	require.ErrorContains(t, err, "more than the maximum of 64 nodes")
}
