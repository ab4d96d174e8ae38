package proto

import (
	"fmt"
	"math/big"
	"strings"
)

// nodeKind is a schema node type.
type nodeKind uint8

const (
	kindConst nodeKind = iota + 1
	kindBoolean
	kindEnum
	kindInteger
	kindObject
	kindTuple
	kindArray
	kindUnion
)

// node is one validated schema node.
type node struct {
	kind   nodeKind
	lit    Value   // const
	values []Value // enum
	min    int64   // integer
	max    int64   // integer
	names  []string
	kids   []*node // object fields, tuple items, union variants; kids[0] for array
	length int     // array
}

// Schema is a parsed, validated finite schema. It is immutable and safe for
// concurrent use.
type Schema struct {
	root    *node
	compact []byte
	card    *big.Int // exact; nil above 2^MaxExactCardinalityBits
	log2    float64
	charge  int64
}

// ParseSchema parses schema JSON text strictly (R1–R9) and validates it
// against the DSL (R11–R24). Errors wrap ErrSchema (and ErrJSON for text
// that is not strict JSON) and say where and why, for example
// `invalid schema: at $.fields: field name "9x" must start with a letter`.
func ParseSchema(src []byte) (*Schema, error) {
	v, err := ParseJSON(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	return SchemaFromValue(v)
}

// SchemaFromValue validates an already parsed JSON value as a schema.
func SchemaFromValue(v Value) (*Schema, error) {
	b := builder{}
	root, err := b.build(v, 0, nil)
	if err != nil {
		return nil, err
	}
	compact := v.AppendCompact(nil)
	if len(compact) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: the schema is %d bytes in compact form; the maximum is %d",
			ErrSchema, len(compact), MaxSchemaBytes)
	}
	s := &Schema{root: root, compact: compact}
	s.card = exactCardinality(root)
	s.log2 = cardinalityLog2(root)
	s.charge = chargeFor(cappedCardinality(root))
	return s, nil
}

// Compact returns the schema's compact JSON text (the bytes measured against
// MaxSchemaBytes): input key order, no whitespace. The caller owns the slice.
func (s *Schema) Compact() []byte { return append([]byte(nil), s.compact...) }

type builder struct {
	nodes int
}

func schemaErr(at *path, format string, args ...any) error {
	return fmt.Errorf("%w: at %s: %s", ErrSchema, at, fmt.Sprintf(format, args...))
}

// keysFor lists the exact keys of each node type, "type" first, or nil for
// an unknown type.
func keysFor(typ string) []string {
	switch typ {
	case "const":
		return []string{"type", "value"}
	case "boolean":
		return []string{"type"}
	case "enum":
		return []string{"type", "values"}
	case "integer":
		return []string{"type", "minimum", "maximum"}
	case "object":
		return []string{"type", "fields"}
	case "tuple":
		return []string{"type", "items"}
	case "array":
		return []string{"type", "items", "length"}
	case "union":
		return []string{"type", "variants"}
	}
	return nil
}

const typeList = "const, boolean, enum, integer, object, tuple, array, union"

// checkKeys enforces the exact key set of a node type.
func checkKeys(v Value, typ string, at *path) error {
	want := keysFor(typ)
	for _, m := range v.members {
		found := false
		for _, k := range want {
			if m.Key == k {
				found = true
				break
			}
		}
		if !found {
			return schemaErr(at, "%s schema must have exactly the keys %s; unexpected key %q", typ, quoteList(want), m.Key)
		}
	}
	for _, k := range want {
		if _, ok := v.member(k); !ok {
			return schemaErr(at, "%s schema must have exactly the keys %s; missing key %q", typ, quoteList(want), k)
		}
	}
	return nil
}

func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// build validates v as a schema node at depth, in the reference order:
// depth, node count, shape, type, exact keys, contents.
func (b *builder) build(v Value, depth int, at *path) (*node, error) {
	if depth > MaxSchemaDepth {
		return nil, schemaErr(at, "schema is nested deeper than the maximum depth of %d (the root is depth 0)", MaxSchemaDepth)
	}
	b.nodes++
	if b.nodes > MaxSchemaNodes {
		return nil, schemaErr(at, "schema has more than the maximum of %d nodes", MaxSchemaNodes)
	}
	if v.kind != KindObject {
		return nil, schemaErr(at, "a schema node must be a JSON object, got %s", v.kind)
	}
	tv, ok := v.member("type")
	if !ok {
		return nil, schemaErr(at, `schema node has no "type"; it must be one of: %s`, typeList)
	}
	if tv.kind != KindString {
		return nil, schemaErr(at.field("type"), `"type" must be a string, one of: %s`, typeList)
	}
	typ := tv.s
	if keysFor(typ) == nil {
		return nil, schemaErr(at.field("type"), "unknown schema type %q; it must be one of: %s", typ, typeList)
	}
	if err := checkKeys(v, typ, at); err != nil {
		return nil, err
	}
	switch typ {
	case "const":
		lit, _ := v.member("value")
		if err := checkLiteral(lit, at.field("value")); err != nil {
			return nil, err
		}
		return &node{kind: kindConst, lit: lit}, nil
	case "boolean":
		return &node{kind: kindBoolean}, nil
	case "enum":
		return b.enum(v, at)
	case "integer":
		return b.integer(v, at)
	case "object", "union":
		return b.named(v, typ, depth, at)
	case "tuple":
		return b.tuple(v, depth, at)
	default: // "array"
		return b.array(v, depth, at)
	}
}

// checkLiteral enforces R19: null, boolean, safe integer (the parser already
// guarantees it) or a string of at most MaxLiteralStringBytes UTF-8 bytes
// without C0 controls or DEL.
func checkLiteral(v Value, at *path) error {
	switch v.kind {
	case KindNull, KindBool, KindInteger:
		return nil
	case KindString:
		if len(v.s) > MaxLiteralStringBytes {
			return schemaErr(at, "string literal is %d UTF-8 bytes; the maximum is %d", len(v.s), MaxLiteralStringBytes)
		}
		for i := 0; i < len(v.s); i++ {
			if c := v.s[i]; c < 0x20 || c == 0x7F {
				return schemaErr(at, "string literal contains control character U+%04X at byte %d", c, i)
			}
		}
		return nil
	}
	return schemaErr(at, "a literal must be a string, an integer, a boolean or null, got %s", v.kind)
}

func (b *builder) enum(v Value, at *path) (*node, error) {
	vals, _ := v.member("values")
	at = at.field("values")
	if vals.kind != KindArray {
		return nil, schemaErr(at, "enum values must be an array, got %s", vals.kind)
	}
	if len(vals.items) == 0 {
		return nil, schemaErr(at, "enum values must not be empty")
	}
	if len(vals.items) > MaxEnumValues {
		return nil, schemaErr(at, "enum has %d values; the maximum is %d", len(vals.items), MaxEnumValues)
	}
	for i, m := range vals.items {
		if err := checkLiteral(m, at.item(i)); err != nil {
			return nil, err
		}
	}
	first := vals.items[0].kind
	for i, m := range vals.items {
		if m.kind != first {
			return nil, schemaErr(at.item(i), "enum values must all have one JSON type: value 0 is %s, this one is %s", first, m.kind)
		}
	}
	if i, j := findDuplicate(vals.items); i >= 0 {
		return nil, schemaErr(at.item(j), "enum value duplicates value %d", i)
	}
	return &node{kind: kindEnum, values: vals.items}, nil
}

// findDuplicate returns the indexes of the first repeated literal, or -1, -1.
func findDuplicate(items []Value) (int, int) {
	if len(items) <= 32 {
		for j := range items {
			for i := 0; i < j; i++ {
				if equalLiteral(items[i], items[j]) {
					return i, j
				}
			}
		}
		return -1, -1
	}
	type key struct {
		kind Kind
		b    bool
		n    int64
		s    string
	}
	seen := make(map[key]int, len(items))
	for j, m := range items {
		k := key{m.kind, m.b, m.n, m.s}
		if i, ok := seen[k]; ok {
			return i, j
		}
		seen[k] = j
	}
	return -1, -1
}

func (b *builder) integer(v Value, at *path) (*node, error) {
	lo, _ := v.member("minimum")
	hi, _ := v.member("maximum")
	if lo.kind != KindInteger {
		return nil, schemaErr(at.field("minimum"), "integer minimum must be an integer, got %s", lo.kind)
	}
	if hi.kind != KindInteger {
		return nil, schemaErr(at.field("maximum"), "integer maximum must be an integer, got %s", hi.kind)
	}
	if hi.n < lo.n {
		return nil, schemaErr(at, "integer maximum %d is less than minimum %d", hi.n, lo.n)
	}
	return &node{kind: kindInteger, min: lo.n, max: hi.n}, nil
}

// named builds an object (fields) or union (variants): every name is checked
// before any child is built, as in the reference.
func (b *builder) named(v Value, typ string, depth int, at *path) (*node, error) {
	key, what, whats, kind, limit := "fields", "field name", "fields", kindObject, MaxObjectFields
	if typ == "union" {
		key, what, whats, kind, limit = "variants", "union tag", "variants", kindUnion, MaxUnionVariants
	}
	m, _ := v.member(key)
	at = at.field(key)
	if m.kind != KindObject {
		return nil, schemaErr(at, "%s %q must be a JSON object, got %s", typ, key, m.kind)
	}
	if len(m.members) == 0 {
		return nil, schemaErr(at, "%s schema must declare at least one of its %s", typ, whats)
	}
	if len(m.members) > limit {
		return nil, schemaErr(at, "%s schema declares %d %s; the maximum is %d", typ, len(m.members), whats, limit)
	}
	n := &node{kind: kind, names: make([]string, len(m.members)), kids: make([]*node, len(m.members))}
	for i, f := range m.members {
		if p := identifierProblem(f.Key); p != "" {
			return nil, schemaErr(at, "%s %q %s", what, f.Key, p)
		}
		n.names[i] = f.Key
	}
	for i, f := range m.members {
		kid, err := b.build(f.Value, depth+1, at.field(f.Key))
		if err != nil {
			return nil, err
		}
		n.kids[i] = kid
	}
	return n, nil
}

func (b *builder) tuple(v Value, depth int, at *path) (*node, error) {
	items, _ := v.member("items")
	at = at.field("items")
	if items.kind != KindArray {
		return nil, schemaErr(at, "tuple items must be an array of schemas, got %s", items.kind)
	}
	if len(items.items) == 0 {
		return nil, schemaErr(at, "tuple must declare at least one item")
	}
	if len(items.items) > MaxTupleItems {
		return nil, schemaErr(at, "tuple declares %d items; the maximum is %d", len(items.items), MaxTupleItems)
	}
	n := &node{kind: kindTuple, kids: make([]*node, len(items.items))}
	for i, it := range items.items {
		kid, err := b.build(it, depth+1, at.item(i))
		if err != nil {
			return nil, err
		}
		n.kids[i] = kid
	}
	return n, nil
}

func (b *builder) array(v Value, depth int, at *path) (*node, error) {
	l, _ := v.member("length")
	if l.kind != KindInteger {
		return nil, schemaErr(at.field("length"), "array length must be an integer from 0 to %d, got %s", MaxArrayLength, l.kind)
	}
	if l.n < 0 || l.n > MaxArrayLength {
		return nil, schemaErr(at.field("length"), "array length %d is outside 0..%d", l.n, MaxArrayLength)
	}
	items, _ := v.member("items")
	kid, err := b.build(items, depth+1, at.field("items"))
	if err != nil {
		return nil, err
	}
	return &node{kind: kindArray, kids: []*node{kid}, length: int(l.n)}, nil
}
