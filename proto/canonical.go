package proto

import (
	"fmt"
	"strconv"
)

// CheckResult treats out as the bytes of a /query/out file: it rejects more
// than MaxResultBytes (R28), parses strictly (R1–R9), validates against s without
// coercion (R29–R34) and returns the canonical serialisation (R35–R37).
// Errors wrap ErrJSON or ErrValue and never quote the file's content.
//
// A conforming file is checked in one streaming pass that builds no tree
// (stream.go); anything that pass does not accept is decided by the tree
// path, which also produces every error. Both must agree byte for byte;
// FuzzCheckResult checks that they do.
func (s *Schema) CheckResult(out []byte) ([]byte, error) {
	if c, ok := s.checkStream(out); ok {
		return c, nil
	}
	return s.checkTree(out)
}

// checkTree is the authoritative path of CheckResult: parse to a tree, then
// validate and canonicalise. It decides every error.
func (s *Schema) checkTree(out []byte) ([]byte, error) {
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
	out, err := appendCanonical(dst, s.root, v)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

func valueErr(format string, args ...any) *locError {
	return newLocError(ErrValue, fmt.Sprintf(format, args...))
}

func appendCanonical(dst []byte, n *node, v Value) ([]byte, *locError) {
	switch n.kind {
	case kindConst:
		if !equalLiteral(v, n.lit) {
			if v.kind != n.lit.kind {
				return nil, valueErr("expected the constant (a %s), got %s", n.lit.kind, v.kind)
			}
			return nil, valueErr("value is not the schema's constant")
		}
		return n.lit.AppendCompact(dst), nil
	case kindBoolean:
		if v.kind != KindBool {
			return nil, valueErr("expected boolean, got %s", v.kind)
		}
		return v.AppendCompact(dst), nil
	case kindEnum:
		for i := range n.values {
			if equalLiteral(v, n.values[i].Value) {
				return n.values[i].Value.AppendCompact(dst), nil
			}
		}
		if first := n.values[0].Value.kind; v.kind != first {
			return nil, valueErr("expected one of the %d enum values (%s), got %s", len(n.values), first, v.kind)
		}
		return nil, valueErr("value is not one of the %d enum values", len(n.values))
	case kindInteger:
		if v.kind != KindInteger {
			return nil, valueErr("expected integer, got %s", v.kind)
		}
		if v.n < n.min || v.n > n.max {
			return nil, valueErr("integer is outside the range %d..%d", n.min, n.max)
		}
		return strconv.AppendInt(dst, v.n, 10), nil
	case kindObject:
		return appendObject(dst, n, v)
	case kindTuple, kindArray:
		return appendArray(dst, n, v)
	}
	return appendUnion(dst, n, v)
}

func appendObject(dst []byte, n *node, v Value) ([]byte, *locError) {
	if v.kind != KindObject {
		return nil, valueErr("expected object, got %s", v.kind)
	}
	dst = append(dst, '{')
	for i, name := range n.names {
		fv, ok := v.member(name)
		if !ok {
			return nil, valueErr("missing field %q", name)
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendIdentifier(dst, name)
		dst = append(dst, ':')
		var err *locError
		if dst, err = appendCanonical(dst, n.kids[i], fv); err != nil {
			return nil, err.at(key(name))
		}
	}
	if len(v.kids) != len(n.names) {
		return nil, valueErr("object has %d keys; the schema declares exactly %d fields", len(v.kids), len(n.names))
	}
	return append(dst, '}'), nil
}

func appendArray(dst []byte, n *node, v Value) ([]byte, *locError) {
	if v.kind != KindArray {
		return nil, valueErr("expected array, got %s", v.kind)
	}
	want := n.length
	if n.kind == kindTuple {
		want = len(n.kids)
	}
	if len(v.kids) != want {
		return nil, valueErr("expected an array of length %d, got length %d", want, len(v.kids))
	}
	dst = append(dst, '[')
	for i := range v.kids {
		if i > 0 {
			dst = append(dst, ',')
		}
		kid := n.kids[0]
		if n.kind == kindTuple {
			kid = n.kids[i]
		}
		var err *locError
		if dst, err = appendCanonical(dst, kid, v.kids[i].Value); err != nil {
			return nil, err.at(index(i))
		}
	}
	return append(dst, ']'), nil
}

func appendUnion(dst []byte, n *node, v Value) ([]byte, *locError) {
	if v.kind != KindObject {
		return nil, valueErr(`expected a union object {"tag":…,"value":…}, got %s`, v.kind)
	}
	tag, hasTag := v.member("tag")
	val, hasVal := v.member("value")
	if len(v.kids) != 2 || !hasTag || !hasVal {
		return nil, valueErr(`a union value must be an object with exactly the keys "tag" and "value"`)
	}
	if tag.kind != KindString {
		return nil, valueErr("union tag must be a string, got %s", tag.kind).at(key("tag"))
	}
	for i, name := range n.names {
		if name != tag.s {
			continue
		}
		dst = append(dst, `{"tag":`...)
		dst = appendIdentifier(dst, name)
		dst = append(dst, `,"value":`...)
		var err *locError
		if dst, err = appendCanonical(dst, n.kids[i], val); err != nil {
			return nil, err.at(key("value"))
		}
		return append(dst, '}'), nil
	}
	return nil, valueErr("union tag is not one of the %d declared tags", len(n.names)).at(key("tag"))
}
