package proto

import (
	"bytes"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseJSON parses src as exactly one strict JSON value (CONTRACT.md R1–R9).
// It rejects input over MaxJSONBytes, invalid UTF-8, leading or trailing
// content other than JSON whitespace, duplicate object keys, lone surrogate
// escapes, nesting over MaxJSONDepth and any number that is not an exact
// integer within ±MaxSafeInteger. It never backtracks and never panics.
// Errors wrap ErrJSON and name a byte offset, never input content.
func ParseJSON(src []byte) (Value, error) {
	if len(src) > MaxJSONBytes {
		return Value{}, fmt.Errorf("%w: input is %d bytes; the maximum is %d", ErrJSON, len(src), MaxJSONBytes)
	}
	if !utf8.Valid(src) {
		return Value{}, fmt.Errorf("%w: at byte %d: invalid UTF-8", ErrJSON, firstInvalidUTF8(src))
	}
	// One copy of the input: unescaped strings become substrings of it.
	p := parser{src: string(src), stack: make([]Member, 0, 32)}
	// Every container element is preceded by '[', '{' or ','; counting them
	// (an over-estimate) sizes the slab so one allocation usually suffices.
	if n := bytes.Count(src, []byte{','}) + bytes.Count(src, []byte{'['}) + bytes.Count(src, []byte{'{'}); n > 0 {
		p.slab = make([]Member, 0, min(n, 1024))
	}
	p.skipSpace()
	if p.pos == len(src) {
		return Value{}, fmt.Errorf("%w: input is empty", ErrJSON)
	}
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(src) {
		return Value{}, p.fail("unexpected content after the JSON value")
	}
	return v, nil
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

type parser struct {
	src   string
	pos   int
	stack []Member // scratch stack of the elements/members being parsed
	slab  []Member // backing store that finished containers are carved from
}

// take copies the finished children of a container into the slab and
// returns them as a capacity-capped slice. Chunks double in size, so a
// document costs a handful of allocations and at most twice the memory.
func (p *parser) take(kids []Member) []Member {
	n := len(kids)
	if cap(p.slab)-len(p.slab) < n {
		p.slab = make([]Member, 0, max(n, 2*cap(p.slab), 16))
	}
	start := len(p.slab)
	p.slab = append(p.slab, kids...)
	return p.slab[start:len(p.slab):len(p.slab)]
}

func (p *parser) fail(msg string) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrJSON, p.pos, msg)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one value enclosed by depth arrays/objects.
func (p *parser) value(depth int) (Value, error) {
	if depth > MaxJSONDepth {
		return Value{}, p.fail(fmt.Sprintf("nesting is deeper than %d levels", MaxJSONDepth))
	}
	if p.pos >= len(p.src) {
		return Value{}, p.fail("unexpected end of input; expected a JSON value")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		start := p.pos
		s, err := p.str()
		// A string whose source has no escapes holds no '"', '\' or
		// control byte, so it is written back as it is.
		plain := len(s) == p.pos-start-2
		return Value{kind: KindString, s: s, plain: plain}, err
	case c == 't':
		return Value{kind: KindBool, n: 1}, p.word("true")
	case c == 'f':
		return Value{kind: KindBool}, p.word("false")
	case c == 'n':
		return Value{kind: KindNull}, p.word("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return Value{}, p.fail("expected a JSON value")
}

func (p *parser) word(w string) error {
	if len(p.src)-p.pos < len(w) || p.src[p.pos:p.pos+len(w)] != w {
		return p.fail("invalid literal; expected true, false or null")
	}
	p.pos += len(w)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) digits() int {
	start := p.pos
	for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
		p.pos++
	}
	return p.pos - start
}

// number checks the full JSON number grammar, then accepts only exact
// integers: no fraction, no exponent, no -0, magnitude at most MaxSafeInteger.
func (p *parser) number() (Value, error) {
	start := p.pos
	neg := false
	if p.src[p.pos] == '-' {
		neg = true
		p.pos++
	}
	if p.pos >= len(p.src) || !isDigit(p.src[p.pos]) {
		return Value{}, p.fail("invalid number: expected a digit")
	}
	digitsStart := p.pos
	if p.src[p.pos] == '0' {
		p.pos++
		if p.pos < len(p.src) && isDigit(p.src[p.pos]) {
			return Value{}, p.fail("invalid number: leading zeros are not allowed")
		}
	} else {
		p.digits()
	}
	digitsEnd := p.pos
	exact := true
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return Value{}, p.fail("invalid number: expected a digit after the decimal point")
		}
		exact = false
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return Value{}, p.fail("invalid number: expected a digit in the exponent")
		}
		exact = false
	}
	end := p.pos
	p.pos = start
	if !exact {
		return Value{}, p.fail("number is not an exact integer: fractions and exponents are not accepted")
	}
	if digitsEnd-digitsStart > 16 {
		return Value{}, p.fail("integer is outside ±(2^53-1)")
	}
	var n int64
	for i := digitsStart; i < digitsEnd; i++ {
		n = n*10 + int64(p.src[i]-'0')
	}
	if n > MaxSafeInteger {
		return Value{}, p.fail("integer is outside ±(2^53-1)")
	}
	if neg {
		if n == 0 {
			return Value{}, p.fail("-0 is not accepted; write 0")
		}
		n = -n
	}
	p.pos = end
	return Value{kind: KindInteger, n: n}, nil
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// hex4 reads the four hex digits of a \u escape starting at p.pos.
func (p *parser) hex4() (rune, error) {
	if len(p.src)-p.pos < 4 {
		return 0, p.fail(`invalid \u escape: expected 4 hex digits`)
	}
	var r rune
	for i := 0; i < 4; i++ {
		h := hexVal(p.src[p.pos+i])
		if h < 0 {
			return 0, p.fail(`invalid \u escape: expected 4 hex digits`)
		}
		r = r<<4 | h
	}
	p.pos += 4
	return r, nil
}

// str parses a string starting at the opening quote. The whole input is
// already known to be valid UTF-8, so raw bytes are copied as they are; a
// string without escapes is returned as a substring of the input.
func (p *parser) str() (string, error) {
	start := p.pos + 1
	for i := start; i < len(p.src); i++ {
		c := p.src[i]
		if c == '"' {
			p.pos = i + 1
			return p.src[start:i], nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	b, err := p.appendStr(nil)
	return string(b), err
}

// appendStr decodes the string starting at the opening quote onto dst.
func (p *parser) appendStr(dst []byte) ([]byte, error) {
	p.pos++
	for {
		if p.pos >= len(p.src) {
			return dst, p.fail("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			return dst, nil
		case c < 0x20:
			return dst, p.fail(fmt.Sprintf("control character U+%04X must be escaped in a string", c))
		case c != '\\':
			dst = append(dst, c)
			p.pos++
			continue
		}
		escAt := p.pos
		p.pos++
		if p.pos >= len(p.src) {
			return dst, p.fail("unterminated string")
		}
		e := p.src[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return dst, err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || len(p.src)-p.pos < 6 || p.src[p.pos] != '\\' || p.src[p.pos+1] != 'u' {
					p.pos = escAt
					return dst, p.fail("lone surrogate escape; surrogates must come in high/low pairs")
				}
				p.pos += 2
				lo, err := p.hex4()
				if err != nil {
					return dst, err
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					p.pos = escAt
					return dst, p.fail("lone surrogate escape; surrogates must come in high/low pairs")
				}
				r = utf16.DecodeRune(r, lo)
			}
			dst = utf8.AppendRune(dst, r)
		default:
			p.pos = escAt
			return dst, p.fail(`invalid escape; allowed are \" \\ \/ \b \f \n \r \t \uXXXX`)
		}
	}
}

// dupIndexThreshold is the member count above which duplicate keys are found
// with a map instead of a linear scan.
const dupIndexThreshold = 32

func (p *parser) object(depth int) (Value, error) {
	p.pos++
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return Value{kind: KindObject}, nil
	}
	// On error the whole parse is abandoned, so only success truncates.
	mark := len(p.stack)
	var seen map[string]struct{}
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return Value{}, p.fail("expected a string key")
		}
		keyAt := p.pos
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return Value{}, p.fail("expected ':' after an object key")
		}
		p.pos++
		p.skipSpace()
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		members := p.stack[mark:]
		dup := false
		if seen != nil {
			_, dup = seen[key]
		} else {
			for i := range members {
				if members[i].Key == key {
					dup = true
					break
				}
			}
		}
		if dup {
			p.pos = keyAt
			return Value{}, p.fail("duplicate object key")
		}
		p.stack = append(p.stack, Member{Key: key, Value: val})
		if seen != nil {
			seen[key] = struct{}{}
		} else if len(members)+1 == dupIndexThreshold {
			seen = make(map[string]struct{}, 2*dupIndexThreshold)
			for _, m := range p.stack[mark:] {
				seen[m.Key] = struct{}{}
			}
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return Value{}, p.fail("unexpected end of input; expected ',' or '}'")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			v := Value{kind: KindObject, kids: p.take(p.stack[mark:])}
			p.stack = p.stack[:mark]
			return v, nil
		default:
			return Value{}, p.fail("expected ',' or '}' after an object member")
		}
	}
}

func (p *parser) array(depth int) (Value, error) {
	p.pos++
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		return Value{kind: KindArray}, nil
	}
	mark := len(p.stack)
	for {
		p.skipSpace()
		item, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		p.stack = append(p.stack, Member{Value: item})
		p.skipSpace()
		if p.pos >= len(p.src) {
			return Value{}, p.fail("unexpected end of input; expected ',' or ']'")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			v := Value{kind: KindArray, kids: p.take(p.stack[mark:])}
			p.stack = p.stack[:mark]
			return v, nil
		default:
			return Value{}, p.fail("expected ',' or ']' after an array element")
		}
	}
}
