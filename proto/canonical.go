package proto

import (
	"fmt"
	"strconv"
)

// CheckResult treats out as the bytes of a /query/out file: it rejects more
// than MaxResultBytes, parses strictly (R1–R9), validates against s without
// coercion (R27–R34) and returns the canonical serialisation (R35–R38).
// Errors wrap ErrJSON or ErrValue and never quote the file's content.
func (s *Schema) CheckResult(out []byte) ([]byte, error) {
	if len(out) > MaxResultBytes {
		return nil, fmt.Errorf("%w: result is %d bytes; the maximum is %d", ErrJSON, len(out), MaxResultBytes)
	}
	v, err := ParseJSON(out)
	if err != nil {
		return nil, err
	}
	return s.AppendCanonical(make([]byte, 0, len(out)), v)
}

// Validate reports whether v conforms to s; the error wraps ErrValue.
func (s *Schema) Validate(v Value) error {
	_, err := s.AppendCanonical(nil, v)
	return err
}

// AppendCanonical validates v against s and appends its canonical
// serialisation to dst: driven by the schema, fields in declaration order,
// no whitespace, const written from the schema. On error dst is returned
// unchanged in length and the error wraps ErrValue.
func (s *Schema) AppendCanonical(dst []byte, v Value) ([]byte, error) {
	n := len(dst)
	out, err := appendCanonical(dst, s.root, v, nil)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

func valueErr(at *path, format string, args ...any) error {
	return fmt.Errorf("%w: at %s: %s", ErrValue, at, fmt.Sprintf(format, args...))
}

func literalDesc(v Value) string { return v.kind.String() }

func appendCanonical(dst []byte, n *node, v Value, at *path) ([]byte, error) {
	switch n.kind {
	case kindConst:
		if !equalLiteral(v, n.lit) {
			if v.kind != n.lit.kind {
				return nil, valueErr(at, "expected the constant (a %s), got %s", literalDesc(n.lit), v.kind)
			}
			return nil, valueErr(at, "value is not the schema's constant")
		}
		return n.lit.AppendCompact(dst), nil
	case kindBoolean:
		if v.kind != KindBool {
			return nil, valueErr(at, "expected boolean, got %s", v.kind)
		}
		return v.AppendCompact(dst), nil
	case kindEnum:
		for i := range n.values {
			if equalLiteral(v, n.values[i]) {
				return n.values[i].AppendCompact(dst), nil
			}
		}
		if v.kind != n.values[0].kind {
			return nil, valueErr(at, "expected one of the %d enum values (%s), got %s", len(n.values), literalDesc(n.values[0]), v.kind)
		}
		return nil, valueErr(at, "value is not one of the %d enum values", len(n.values))
	case kindInteger:
		if v.kind != KindInteger {
			return nil, valueErr(at, "expected integer, got %s", v.kind)
		}
		if v.n < n.min || v.n > n.max {
			return nil, valueErr(at, "integer is outside the range %d..%d", n.min, n.max)
		}
		return strconv.AppendInt(dst, v.n, 10), nil
	case kindObject:
		if v.kind != KindObject {
			return nil, valueErr(at, "expected object, got %s", v.kind)
		}
		dst = append(dst, '{')
		for i, name := range n.names {
			fv, ok := v.member(name)
			if !ok {
				return nil, valueErr(at, "missing field %q", name)
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, name)
			dst = append(dst, ':')
			var err error
			if dst, err = appendCanonical(dst, n.kids[i], fv, at.field(name)); err != nil {
				return nil, err
			}
		}
		if len(v.members) != len(n.names) {
			return nil, valueErr(at, "object has %d keys; the schema declares exactly %d fields", len(v.members), len(n.names))
		}
		return append(dst, '}'), nil
	case kindTuple, kindArray:
		if v.kind != KindArray {
			return nil, valueErr(at, "expected array, got %s", v.kind)
		}
		want := n.length
		if n.kind == kindTuple {
			want = len(n.kids)
		}
		if len(v.items) != want {
			return nil, valueErr(at, "expected an array of length %d, got length %d", want, len(v.items))
		}
		dst = append(dst, '[')
		for i := range v.items {
			if i > 0 {
				dst = append(dst, ',')
			}
			kid := n.kids[0]
			if n.kind == kindTuple {
				kid = n.kids[i]
			}
			var err error
			if dst, err = appendCanonical(dst, kid, v.items[i], at.item(i)); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	// union
	if v.kind != KindObject {
		return nil, valueErr(at, `expected a union object {"tag":…,"value":…}, got %s`, v.kind)
	}
	tag, hasTag := v.member("tag")
	val, hasVal := v.member("value")
	if len(v.members) != 2 || !hasTag || !hasVal {
		return nil, valueErr(at, `a union value must be an object with exactly the keys "tag" and "value"`)
	}
	if tag.kind != KindString {
		return nil, valueErr(at.field("tag"), "union tag must be a string, got %s", tag.kind)
	}
	for i, name := range n.names {
		if name == tag.s {
			dst = append(dst, `{"tag":`...)
			dst = appendString(dst, name)
			dst = append(dst, `,"value":`...)
			var err error
			if dst, err = appendCanonical(dst, n.kids[i], val, at.field("value")); err != nil {
				return nil, err
			}
			return append(dst, '}'), nil
		}
	}
	return nil, valueErr(at.field("tag"), "union tag is not one of the %d declared tags", len(n.names))
}
