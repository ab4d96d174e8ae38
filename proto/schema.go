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
	lit    Value    // const
	values []Member // enum (the parsed array's elements)
	min    int64    // integer
	max    int64    // integer
	names  []string
	kids   []*node // object fields, tuple items, union variants; kids[0] for array
	length int     // array
}

// Schema is a parsed, validated finite schema. It is immutable and safe for
// concurrent use.
type Schema struct {
	root   *node
	text   Value    // the schema as parsed, for Compact
	card   *big.Int // exact; nil above 2^MaxExactCardinalityBits
	log2   float64
	charge int64
}

// ParseSchema parses schema JSON text strictly (R1–R9) and validates it
// against the DSL (R11–R25). Errors wrap ErrSchema (and ErrJSON for text
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
	root, lerr := b.build(v, 0)
	if lerr != nil {
		return nil, lerr
	}
	if size := v.compactLen(); size > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: the schema is %d bytes in compact form; the maximum is %d",
			ErrSchema, size, MaxSchemaBytes)
	}
	s := &Schema{root: root, text: v}
	s.card = exactCardinality(root)
	s.log2 = cardinalityLog2(root)
	if s.card != nil {
		s.charge = ChargeForCardinality(s.card)
	} else {
		s.charge = chargeFor(cappedCardinality(root))
	}
	return s, nil
}

// Compact returns the schema's compact JSON text (the bytes measured against
// MaxSchemaBytes): input key order, no whitespace. The caller owns the slice.
func (s *Schema) Compact() []byte { return s.text.AppendCompact(nil) }

// builder validates a schema tree. Nodes, names and child lists are carved
// from slabs; a full slab is replaced, never grown, so pointers into it stay
// valid.
type builder struct {
	nodes    int
	strSeen  map[string]int // scratch for enum duplicate checks, reused
	intSeen  map[int64]int
	nodeSlab []node
	nameSlab []string
	kidSlab  []*node
}

// newNode returns a node from the slab, allocated in chunks of 16.
func (b *builder) newNode(n node) *node {
	if len(b.nodeSlab) == cap(b.nodeSlab) {
		b.nodeSlab = make([]node, 0, 16)
	}
	b.nodeSlab = append(b.nodeSlab, n)
	return &b.nodeSlab[len(b.nodeSlab)-1]
}

// lists returns a names slice (if withNames) and a children slice of length
// n, carved from slabs sized for the whole schema.
func (b *builder) lists(n int, withNames bool) ([]string, []*node) {
	if cap(b.kidSlab)-len(b.kidSlab) < n {
		// Lists are reserved before their children are checked, so nested
		// reservations can exceed the node limit; start a fresh slab then.
		b.kidSlab = make([]*node, 0, max(n, MaxSchemaNodes))
	}
	kids := b.kidSlab[len(b.kidSlab) : len(b.kidSlab)+n : len(b.kidSlab)+n]
	b.kidSlab = b.kidSlab[:len(b.kidSlab)+n]
	if !withNames {
		return nil, kids
	}
	if cap(b.nameSlab)-len(b.nameSlab) < n {
		b.nameSlab = make([]string, 0, max(n, MaxSchemaNodes))
	}
	names := b.nameSlab[len(b.nameSlab) : len(b.nameSlab)+n : len(b.nameSlab)+n]
	b.nameSlab = b.nameSlab[:len(b.nameSlab)+n]
	return names, kids
}

func schemaErr(format string, args ...any) *locError {
	return newLocError(ErrSchema, fmt.Sprintf(format, args...))
}

// keySet is the exact key set of a node type, "type" first.
type keySet struct {
	keys [3]string
	n    int
}

// keysFor returns the exact keys of a node type; n is 0 for an unknown type.
func keysFor(typ string) keySet {
	switch typ {
	case "const":
		return keySet{[3]string{"type", "value"}, 2}
	case "boolean":
		return keySet{[3]string{"type"}, 1}
	case "enum":
		return keySet{[3]string{"type", "values"}, 2}
	case "integer":
		return keySet{[3]string{"type", "minimum", "maximum"}, 3}
	case "object":
		return keySet{[3]string{"type", "fields"}, 2}
	case "tuple":
		return keySet{[3]string{"type", "items"}, 2}
	case "array":
		return keySet{[3]string{"type", "items", "length"}, 3}
	case "union":
		return keySet{[3]string{"type", "variants"}, 2}
	}
	return keySet{}
}

const typeList = "const, boolean, enum, integer, object, tuple, array, union"

// checkKeys enforces the exact key set of a node type.
func checkKeys(v Value, typ string) *locError {
	ks := keysFor(typ)
	want := ks.keys[:ks.n]
	for _, m := range v.kids {
		found := false
		for _, k := range want {
			if m.Key == k {
				found = true
				break
			}
		}
		if !found {
			return schemaErr("%s schema must have exactly the keys %s; unexpected key %q", typ, quoteList(want), m.Key)
		}
	}
	for _, k := range want {
		if _, ok := v.member(k); !ok {
			return schemaErr("%s schema must have exactly the keys %s; missing key %q", typ, quoteList(want), k)
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
// depth, node count, shape, type, exact keys, contents (R12).
func (b *builder) build(v Value, depth int) (*node, *locError) {
	if depth > MaxSchemaDepth {
		return nil, schemaErr("schema is nested deeper than the maximum depth of %d (the root is depth 0)", MaxSchemaDepth)
	}
	b.nodes++
	if b.nodes > MaxSchemaNodes {
		return nil, schemaErr("schema has more than the maximum of %d nodes", MaxSchemaNodes)
	}
	if v.kind != KindObject {
		return nil, schemaErr("a schema node must be a JSON object, got %s", v.kind)
	}
	tv, ok := v.member("type")
	if !ok {
		return nil, schemaErr(`schema node has no "type"; it must be one of: %s`, typeList)
	}
	if tv.kind != KindString {
		return nil, schemaErr(`"type" must be a string, one of: %s`, typeList).at(key("type"))
	}
	typ := tv.s
	if keysFor(typ).n == 0 {
		return nil, schemaErr("unknown schema type %q; it must be one of: %s", typ, typeList).at(key("type"))
	}
	if err := checkKeys(v, typ); err != nil {
		return nil, err
	}
	switch typ {
	case "const":
		lit, _ := v.member("value")
		if err := checkLiteral(lit); err != nil {
			return nil, err.at(key("value"))
		}
		return b.newNode(node{kind: kindConst, lit: lit}), nil
	case "boolean":
		return b.newNode(node{kind: kindBoolean}), nil
	case "enum":
		return b.enum(v)
	case "integer":
		return b.integer(v)
	case "object", "union":
		return b.named(v, typ, depth)
	case "tuple":
		return b.tuple(v, depth)
	default: // "array"
		return b.array(v, depth)
	}
}

// checkLiteral enforces R19: null, boolean, safe integer (the parser already
// guarantees it) or a string of at most MaxLiteralStringBytes UTF-8 bytes
// without C0 controls or DEL.
func checkLiteral(v Value) *locError {
	switch v.kind {
	case KindNull, KindBool, KindInteger:
		return nil
	case KindString:
		if len(v.s) > MaxLiteralStringBytes {
			return schemaErr("string literal is %d UTF-8 bytes; the maximum is %d", len(v.s), MaxLiteralStringBytes)
		}
		for i := 0; i < len(v.s); i++ {
			if c := v.s[i]; c < 0x20 || c == 0x7F {
				return schemaErr("string literal contains control character U+%04X at byte %d", c, i)
			}
		}
		return nil
	}
	return schemaErr("a literal must be a string, an integer, a boolean or null, got %s", v.kind)
}

func (b *builder) enum(v Value) (*node, *locError) {
	vals, _ := v.member("values")
	at := key("values")
	if vals.kind != KindArray {
		return nil, schemaErr("enum values must be an array, got %s", vals.kind).at(at)
	}
	if len(vals.kids) == 0 {
		return nil, schemaErr("enum values must not be empty").at(at)
	}
	if len(vals.kids) > MaxEnumValues {
		return nil, schemaErr("enum has %d values; the maximum is %d", len(vals.kids), MaxEnumValues).at(at)
	}
	for i, m := range vals.kids {
		if err := checkLiteral(m.Value); err != nil {
			return nil, err.at(at, index(i))
		}
	}
	first := vals.kids[0].Value.kind
	for i, m := range vals.kids {
		if m.Value.kind != first {
			return nil, schemaErr("enum values must all have one JSON type: value 0 is %s, this one is %s", first, m.Value.kind).at(at, index(i))
		}
	}
	if i, j := b.findDuplicate(vals.kids); i >= 0 {
		return nil, schemaErr("enum value duplicates value %d", i).at(at, index(j))
	}
	return b.newNode(node{kind: kindEnum, values: vals.kids}), nil
}

// findDuplicate returns the indexes of the first repeated literal, or -1, -1.
// All items have one kind (checked before).
func (b *builder) findDuplicate(items []Member) (int, int) {
	if len(items) <= 16 || items[0].Value.kind == KindNull || items[0].Value.kind == KindBool {
		for j := range items {
			for i := 0; i < j; i++ {
				if equalLiteral(items[i].Value, items[j].Value) {
					return i, j
				}
			}
		}
		return -1, -1
	}
	if items[0].Value.kind == KindString {
		return firstRepeat(items, &b.strSeen, func(v Value) string { return v.s })
	}
	return firstRepeat(items, &b.intSeen, func(v Value) int64 { return v.n })
}

// firstRepeat returns the indexes of the first item whose key repeats an
// earlier one, or -1, -1. *seen is the builder's scratch map for keys of this
// type, made on first use and reused across the enums of one build.
func firstRepeat[K comparable](items []Member, seen *map[K]int, key func(Value) K) (int, int) {
	if *seen == nil {
		*seen = make(map[K]int, len(items))
	}
	m := *seen
	clear(m)
	for j, it := range items {
		k := key(it.Value)
		if i, ok := m[k]; ok {
			return i, j
		}
		m[k] = j
	}
	return -1, -1
}

func (b *builder) integer(v Value) (*node, *locError) {
	lo, _ := v.member("minimum")
	hi, _ := v.member("maximum")
	if lo.kind != KindInteger {
		return nil, schemaErr("integer minimum must be an integer, got %s", lo.kind).at(key("minimum"))
	}
	if hi.kind != KindInteger {
		return nil, schemaErr("integer maximum must be an integer, got %s", hi.kind).at(key("maximum"))
	}
	if hi.n < lo.n {
		return nil, schemaErr("integer maximum %d is less than minimum %d", hi.n, lo.n)
	}
	return b.newNode(node{kind: kindInteger, min: lo.n, max: hi.n}), nil
}

// named builds an object (fields) or union (variants): every name is checked
// before any child is built, as in the reference.
func (b *builder) named(v Value, typ string, depth int) (*node, *locError) {
	k, what, whats, kind, limit := "fields", "field name", "fields", kindObject, MaxObjectFields
	if typ == "union" {
		k, what, whats, kind, limit = "variants", "union tag", "variants", kindUnion, MaxUnionVariants
	}
	m, _ := v.member(k)
	at := key(k)
	if m.kind != KindObject {
		return nil, schemaErr("%s %q must be a JSON object, got %s", typ, k, m.kind).at(at)
	}
	if len(m.kids) == 0 {
		return nil, schemaErr("%s schema must declare at least one of its %s", typ, whats).at(at)
	}
	if len(m.kids) > limit {
		return nil, schemaErr("%s schema declares %d %s; the maximum is %d", typ, len(m.kids), whats, limit).at(at)
	}
	names, kids := b.lists(len(m.kids), true)
	n := b.newNode(node{kind: kind, names: names, kids: kids})
	for i, f := range m.kids {
		if p := identifierProblem(f.Key); p != "" {
			return nil, schemaErr("%s %q %s", what, f.Key, p).at(at)
		}
		n.names[i] = f.Key
	}
	for i, f := range m.kids {
		kid, err := b.build(f.Value, depth+1)
		if err != nil {
			return nil, err.at(at, key(f.Key))
		}
		n.kids[i] = kid
	}
	return n, nil
}

func (b *builder) tuple(v Value, depth int) (*node, *locError) {
	items, _ := v.member("items")
	at := key("items")
	if items.kind != KindArray {
		return nil, schemaErr("tuple items must be an array of schemas, got %s", items.kind).at(at)
	}
	if len(items.kids) == 0 {
		return nil, schemaErr("tuple must declare at least one item").at(at)
	}
	if len(items.kids) > MaxTupleItems {
		return nil, schemaErr("tuple declares %d items; the maximum is %d", len(items.kids), MaxTupleItems).at(at)
	}
	_, kids := b.lists(len(items.kids), false)
	n := b.newNode(node{kind: kindTuple, kids: kids})
	for i, it := range items.kids {
		kid, err := b.build(it.Value, depth+1)
		if err != nil {
			return nil, err.at(at, index(i))
		}
		n.kids[i] = kid
	}
	return n, nil
}

func (b *builder) array(v Value, depth int) (*node, *locError) {
	l, _ := v.member("length")
	if l.kind != KindInteger {
		return nil, schemaErr("array length must be an integer from 0 to %d, got %s", MaxArrayLength, l.kind).at(key("length"))
	}
	if l.n < 0 || l.n > MaxArrayLength {
		return nil, schemaErr("array length %d is outside 0..%d", l.n, MaxArrayLength).at(key("length"))
	}
	items, _ := v.member("items")
	kid, err := b.build(items, depth+1)
	if err != nil {
		return nil, err.at(key("items"))
	}
	_, kids := b.lists(1, false)
	kids[0] = kid
	return b.newNode(node{kind: kindArray, kids: kids, length: int(l.n)}), nil
}
