package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseError is one problem found in a policy file, with its position.
type ParseError struct {
	File string
	Line int // 1-based
	Col  int // 1-based, in characters
	Msg  string
}

// Error renders file:line:col: message.
func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// ParseErrors is every problem found in one file, in file order.
type ParseErrors []*ParseError

// Error joins the problems one per line.
func (es ParseErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// token is one lexical item of a line's rule part.
type token struct {
	text string
	col  int
}

// isWord reports whether c may appear in a name or number.
func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// twoCharOps are operators of two characters; they are tried first.
var twoCharOps = []string{"==", "!=", "<=", ">=", "&&"}

// lexLine splits s (a line prefix starting at byte offset base of line) into
// tokens. col is computed against the whole line so positions are exact.
func lexLine(line string, base int, s string) ([]token, *ParseError) {
	colAt := func(off int) int { return utf8.RuneCountInString(line[:base+off]) + 1 }
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case isWord(c):
			j := i
			for j < len(s) && (isWord(s[j]) || s[j] == '-') {
				j++
			}
			toks = append(toks, token{s[i:j], colAt(i)})
			i = j
		default:
			matched := false
			for _, op := range twoCharOps {
				if strings.HasPrefix(s[i:], op) {
					toks = append(toks, token{op, colAt(i)})
					i += 2
					matched = true
					break
				}
			}
			if matched {
				continue
			}
			if strings.ContainsRune("<>&|{},+", rune(c)) {
				toks = append(toks, token{string(c), colAt(i)})
				i++
				continue
			}
			r, _ := utf8.DecodeRuneInString(s[i:])
			return nil, &ParseError{Line: 0, Col: colAt(i), Msg: fmt.Sprintf("unexpected character %q", r)}
		}
	}
	return toks, nil
}
