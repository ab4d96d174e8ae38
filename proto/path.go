package proto

import (
	"strconv"
	"strings"
)

// path locates a node inside a JSON document, built only when an error is
// reported. It prints as $, $.name, $[3] or $["odd key"].
type path struct {
	parent *path
	key    string
	index  int
	isKey  bool
}

func (p *path) field(key string) *path { return &path{parent: p, key: key, isKey: true} }
func (p *path) item(i int) *path       { return &path{parent: p, index: i} }

func (p *path) String() string {
	var parts []*path
	for q := p; q != nil; q = q.parent {
		parts = append(parts, q)
	}
	var b strings.Builder
	b.WriteByte('$')
	for i := len(parts) - 1; i >= 0; i-- {
		q := parts[i]
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

// identifierProblem explains why s is not an identifier, or returns "".
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
