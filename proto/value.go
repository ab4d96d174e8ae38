package proto

// Kind is the JSON type of a parsed Value.
type Kind uint8

// The JSON types the strict parser produces. There is no kind for
// non-integral numbers: the parser rejects them.
const (
	KindNull Kind = iota + 1
	KindBool
	KindInteger
	KindString
	KindArray
	KindObject
)

// String names the kind as CONTRACT.md does.
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindInteger:
		return "integer"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "invalid"
}

// Value is one strictly parsed JSON value. The zero Value is invalid. Values
// are immutable by convention: callers must not modify the slices returned by
// Items and Members.
type Value struct {
	kind    Kind
	b       bool
	n       int64
	s       string
	items   []Value
	members []Member
}

// Member is one key/value pair of a JSON object, in input order.
type Member struct {
	Key   string
	Value Value
}

// Kind returns the JSON type of v.
func (v Value) Kind() Kind { return v.kind }

// Bool returns the value of a boolean.
func (v Value) Bool() bool { return v.b }

// Int returns the value of an integer.
func (v Value) Int() int64 { return v.n }

// Str returns the value of a string.
func (v Value) Str() string { return v.s }

// Items returns the elements of an array.
func (v Value) Items() []Value { return v.items }

// Members returns the members of an object in input order.
func (v Value) Members() []Member { return v.members }

// member returns the value under key and whether it exists.
func (v Value) member(key string) (Value, bool) {
	for i := range v.members {
		if v.members[i].Key == key {
			return v.members[i].Value, true
		}
	}
	return Value{}, false
}

// equalLiteral reports whether two scalar values are the same literal: same
// kind and same value. Containers are never equal literals.
func equalLiteral(a, b Value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case KindNull:
		return true
	case KindBool:
		return a.b == b.b
	case KindInteger:
		return a.n == b.n
	case KindString:
		return a.s == b.s
	}
	return false
}
