package agentloop

import (
	"fmt"
	"strconv"

	"github.com/awf-project/awf/proto"
)

// FinishParameters compiles a finite schema into the JSON Schema of the
// finish tool's parameters: {"result": <the schema>}, nothing else. The
// compiled schema is advice to the model only; the loop validates every
// result with proto's own validator, never with the JSON Schema.
func FinishParameters(s *proto.Schema) ([]byte, error) {
	v, err := proto.ParseJSON(s.Compact())
	if err != nil {
		return nil, fmt.Errorf("reparse the schema: %w", err)
	}
	dst := []byte(`{"type":"object","properties":{"result":`)
	dst, err = compileNode(dst, v)
	if err != nil {
		return nil, err
	}
	return append(dst, `},"required":["result"],"additionalProperties":false}`...), nil
}

// member returns the value of key in a parsed schema node.
func member(v proto.Value, key string) (proto.Value, bool) {
	for _, m := range v.Members() {
		if m.Key == key {
			return m.Value, true
		}
	}
	return proto.Value{}, false
}

// compileNode translates one validated DSL node: const → const, enum →
// enum, integer → minimum/maximum, object → properties with every field
// required and no others, tuple → prefixItems of fixed length, array →
// items of fixed length, union → oneOf the tagged {"tag","value"} objects.
func compileNode(dst []byte, v proto.Value) ([]byte, error) {
	t, _ := member(v, "type")
	var err error
	switch t.Str() {
	case "const":
		lit, _ := member(v, "value")
		dst = append(dst, `{"const":`...)
		dst = lit.AppendCompact(dst)
		return append(dst, '}'), nil
	case "boolean":
		return append(dst, `{"type":"boolean"}`...), nil
	case "enum":
		vals, _ := member(v, "values")
		dst = append(dst, `{"enum":`...)
		dst = vals.AppendCompact(dst)
		return append(dst, '}'), nil
	case "integer":
		lo, _ := member(v, "minimum")
		hi, _ := member(v, "maximum")
		dst = append(dst, `{"type":"integer","minimum":`...)
		dst = strconv.AppendInt(dst, lo.Int(), 10)
		dst = append(dst, `,"maximum":`...)
		dst = strconv.AppendInt(dst, hi.Int(), 10)
		return append(dst, '}'), nil
	case "object":
		fields, _ := member(v, "fields")
		dst = append(dst, `{"type":"object","properties":{`...)
		for i, f := range fields.Members() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendQuote(dst, f.Key) // identifiers are ASCII
			dst = append(dst, ':')
			if dst, err = compileNode(dst, f.Value); err != nil {
				return nil, err
			}
		}
		dst = append(dst, `},"required":[`...)
		for i, f := range fields.Members() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendQuote(dst, f.Key)
		}
		return append(dst, `],"additionalProperties":false}`...), nil
	case "tuple":
		items, _ := member(v, "items")
		dst = append(dst, `{"type":"array","prefixItems":[`...)
		for i, it := range items.Members() {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = compileNode(dst, it.Value); err != nil {
				return nil, err
			}
		}
		dst = append(dst, `],"items":false,"minItems":`...)
		dst = strconv.AppendInt(dst, int64(items.Len()), 10)
		dst = append(dst, `,"maxItems":`...)
		dst = strconv.AppendInt(dst, int64(items.Len()), 10)
		return append(dst, '}'), nil
	case "array":
		item, _ := member(v, "items")
		n, _ := member(v, "length")
		dst = append(dst, `{"type":"array","items":`...)
		if dst, err = compileNode(dst, item); err != nil {
			return nil, err
		}
		dst = append(dst, `,"minItems":`...)
		dst = strconv.AppendInt(dst, n.Int(), 10)
		dst = append(dst, `,"maxItems":`...)
		dst = strconv.AppendInt(dst, n.Int(), 10)
		return append(dst, '}'), nil
	case "union":
		variants, _ := member(v, "variants")
		dst = append(dst, `{"oneOf":[`...)
		for i, m := range variants.Members() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":"object","properties":{"tag":{"const":`...)
			dst = strconv.AppendQuote(dst, m.Key)
			dst = append(dst, `},"value":`...)
			if dst, err = compileNode(dst, m.Value); err != nil {
				return nil, err
			}
			dst = append(dst, `},"required":["tag","value"],"additionalProperties":false}`...)
		}
		return append(dst, `]}`...), nil
	}
	return nil, fmt.Errorf("schema node type %q is not in the DSL", t.Str())
}
