package proto

import (
	"strconv"
	"strings"
)

// pathElem is one step into a JSON document: an object key or an array index.
type pathElem struct {
	key   string
	index int
	isKey bool
}

func key(k string) pathElem { return pathElem{key: k, isKey: true} }
func index(i int) pathElem  { return pathElem{index: i} }

// locError is an error at a place in a JSON document. The path is collected
// while the error travels up the recursion, so the success path allocates
// nothing for locations. It prints as "<class>: at $.a[3]: <msg>".
type locError struct {
	class error
	msg   string
	rev   []pathElem // innermost first
}

func newLocError(class error, msg string) *locError { return &locError{class: class, msg: msg} }

// at prefixes the location with elems, given outermost first.
func (e *locError) at(elems ...pathElem) *locError {
	for i := len(elems) - 1; i >= 0; i-- {
		e.rev = append(e.rev, elems[i])
	}
	return e
}

// Error implements error.
func (e *locError) Error() string {
	return e.class.Error() + ": at " + e.path() + ": " + e.msg
}

// Unwrap returns the error class.
func (e *locError) Unwrap() error { return e.class }

func (e *locError) path() string {
	var b strings.Builder
	b.WriteByte('$')
	for i := len(e.rev) - 1; i >= 0; i-- {
		q := e.rev[i]
		switch {
		case !q.isKey:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(q.index))
			b.WriteByte(']')
		case isIdentifier(q.key):
			b.WriteByte('.')
			b.WriteString(q.key)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(q.key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// isIdentifier reports whether s matches ^[A-Za-z][A-Za-z0-9_]{0,63}$.
func isIdentifier(s string) bool { return identifierProblem(s) == "" }

// identifierProblem explains why s is not an identifier (R25), or returns "".
func identifierProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	c := s[0]
	if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
		return "must start with a letter"
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return "may contain only ASCII letters, digits and '_' (byte " + strconv.Itoa(i) + " is not one)"
		}
	}
	if len(s) > MaxIdentifierBytes {
		return "is " + strconv.Itoa(len(s)) + " bytes long; the maximum is " + strconv.Itoa(MaxIdentifierBytes)
	}
	return ""
}
