package proto_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/awf-project/awf/proto"
)

// FuzzParseJSON: the parser never panics, fails only with ErrJSON, and the
// compact form of anything it accepts re-parses to the same compact bytes.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`null`, `{"a":[1,-2,"x\u00e9\ud83d\ude00"]}`, `[[[]]]`, ` true `, `"\u2028"`, `{"__proto__":0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := proto.ParseJSON(data)
		if err != nil {
			if !errors.Is(err, proto.ErrJSON) {
				t.Fatalf("error not of class ErrJSON: %v", err)
			}
			return
		}
		c := v.AppendCompact(nil)
		if len(c) > len(data) {
			t.Fatalf("compact form %q is longer than input %q", c, data)
		}
		v2, err := proto.ParseJSON(c)
		if err != nil {
			t.Fatalf("compact form %q does not re-parse: %v", c, err)
		}
		if c2 := v2.AppendCompact(nil); !bytes.Equal(c, c2) {
			t.Fatalf("round trip differs: %q then %q", c, c2)
		}
	})
}

// FuzzParseSchema: the schema validator never panics, fails only with
// ErrSchema, and an accepted schema's compact text is accepted again with the
// same compact text, charge and cardinality.
func FuzzParseSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"boolean"}`,
		`{"type":"enum","values":["MIT","Apache-2.0"]}`,
		`{"type":"object","fields":{"a":{"type":"integer","minimum":0,"maximum":9},"b":{"type":"const","value":null}}}`,
		`{"type":"union","variants":{"x":{"type":"tuple","items":[{"type":"boolean"}]},"y":{"type":"array","length":3,"items":{"type":"boolean"}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := proto.ParseSchema(data)
		if err != nil {
			if !errors.Is(err, proto.ErrSchema) {
				t.Fatalf("error not of class ErrSchema: %v", err)
			}
			return
		}
		c := s.Compact()
		if len(c) > proto.MaxSchemaBytes {
			t.Fatalf("accepted schema of %d compact bytes", len(c))
		}
		s2, err := proto.ParseSchema(c)
		if err != nil {
			t.Fatalf("compact schema %q rejected: %v", c, err)
		}
		if !bytes.Equal(s2.Compact(), c) || s2.ChargeBits() != s.ChargeBits() || s2.CardinalityLog2() != s.CardinalityLog2() {
			t.Fatalf("round trip of %q changed the schema", c)
		}
		if ch := s.ChargeBits(); ch < proto.MinChargeBits || ch > proto.MaxChargeBits {
			t.Fatalf("charge %d out of bounds", ch)
		}
		if card := s.Cardinality(); card != nil && proto.ChargeForCardinality(card) != s.ChargeBits() {
			t.Fatalf("charge %d disagrees with exact cardinality %s", s.ChargeBits(), card)
		}
	})
}

// FuzzCheckResult: value validation never panics, fails only with ErrJSON or
// ErrValue, and a canonical result is a fixed point.
func FuzzCheckResult(f *testing.F) {
	add := func(schema, value string) { f.Add([]byte(schema), []byte(value)) }
	add(`{"type":"boolean"}`, `true`)
	add(`{"type":"integer","minimum":-3,"maximum":300}`, ` 255 `)
	add(`{"type":"object","fields":{"b":{"type":"boolean"},"a":{"type":"enum","values":["x","y"]}}}`, `{"a":"y","b":false}`)
	add(`{"type":"union","variants":{"n":{"type":"const","value":null},"t":{"type":"tuple","items":[{"type":"boolean"},{"type":"const","value":"</\u2028>"}]}}}`, `{"value":[true,"</\u2028>"],"tag":"t"}`)
	add(`{"type":"array","length":2,"items":{"type":"enum","values":[1,2,3]}}`, `[3,1]`)
	add(`{"type":"union","variants":{"a":{"type":"object","fields":{"x":{"type":"boolean"},"y":{"type":"const","value":"\u00e9"}}},"b":{"type":"array","length":1,"items":{"type":"integer","minimum":-9,"maximum":9}}}}`,
		`{"value" : {"y":"\u00e9","x":false} , "tag":"a"}`)
	add(`{"type":"union","variants":{"a":{"type":"boolean"},"b":{"type":"array","length":1,"items":{"type":"integer","minimum":-9,"maximum":9}}}}`,
		`{"value":[-9],"tag":"b"}`)
	add(`{"type":"object","fields":{"k":{"type":"enum","values":["a\"b","c\\d","\u2028"]},"z":{"type":"tuple","items":[{"type":"boolean"}]}}}`,
		`{"\u007a":[true],"k":"a\u0022b"}`)
	f.Fuzz(func(t *testing.T, schema, value []byte) {
		s, err := proto.ParseSchema(schema)
		if err != nil {
			return
		}
		stream, streamOK, tree, treeErr := s.CheckResultPaths(value)
		if streamOK && (treeErr != nil || !bytes.Equal(stream, tree)) {
			t.Fatalf("fast path accepted %q as %q; tree path: %q, %v", value, stream, tree, treeErr)
		}
		c, err := s.CheckResult(value)
		if err != nil {
			if !errors.Is(err, proto.ErrJSON) && !errors.Is(err, proto.ErrValue) {
				t.Fatalf("error of unexpected class: %v", err)
			}
			return
		}
		c2, err := s.CheckResult(c)
		if err != nil {
			t.Fatalf("canonical %q rejected: %v", c, err)
		}
		if !bytes.Equal(c, c2) {
			t.Fatalf("canonical form not a fixed point: %q then %q", c, c2)
		}
		generic, err := proto.CompactJSON(c)
		if err != nil || !bytes.Equal(generic, c) {
			t.Fatalf("canonical %q is not compact JSON (%q, %v)", c, generic, err)
		}
	})
}
