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
	kind  Kind
	plain bool     // string needs no escaping when written (R10)
	n     int64    // integer value; 1 for true
	s     string   // string value
	kids  []Member // array elements (empty keys) or object members
}

// Member is one key/value pair of a JSON object, in input order.
type Member struct {
	Key   string
	Value Value
}

// Kind returns the JSON type of v.
func (v Value) Kind() Kind { return v.kind }

// Bool returns the value of a boolean.
func (v Value) Bool() bool { return v.kind == KindBool && v.n != 0 }

// Int returns the value of an integer.
func (v Value) Int() int64 { return v.n }

// Str returns the value of a string.
func (v Value) Str() string { return v.s }

// Len returns the number of elements of an array or members of an object.
func (v Value) Len() int { return len(v.kids) }

// Index returns element i of an array (or the value of member i of an object).
func (v Value) Index(i int) Value { return v.kids[i].Value }

// Members returns the members of an object in input order (for an array,
// its elements with empty keys).
func (v Value) Members() []Member { return v.kids }

// member returns the value under key and whether it exists.
func (v Value) member(key string) (Value, bool) {
	for i := range v.kids {
		if v.kids[i].Key == key {
			return v.kids[i].Value, true
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
	case KindBool, KindInteger:
		return a.n == b.n
	case KindString:
		return a.s == b.s
	}
	return false
}
