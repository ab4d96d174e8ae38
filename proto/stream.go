package proto

import "unicode/utf8"

// streamChecker is the fast path of CheckResult: one pass over the input that
// parses, validates against the schema and writes canonical bytes without
// building a tree. It is deliberately conservative: whenever the input is not
// plainly valid (any syntax or schema problem, or a shape it does not handle,
// such as a union whose "value" precedes its "tag") it gives up, and
// CheckResult re-checks the input on the tree path (ParseJSON then
// AppendCanonical), which is authoritative for every error and for anything
// the fast path declines. The two paths are compared by FuzzCheckResult.
type streamChecker struct {
	src     string
	pos     int
	lastNum int // start of the integer just read
	out     []byte
	tmp     []byte // scratch for reordering object fields
	buf     []byte // scratch for decoding escaped strings
}

// checkStream returns the canonical bytes, or ok=false to fall back.
func (s *Schema) checkStream(src []byte) (out []byte, ok bool) {
	if len(src) > MaxResultBytes || !utf8.Valid(src) {
		return nil, false
	}
	c := streamChecker{src: string(src), out: make([]byte, 0, len(src))}
	c.skipSpace()
	if !c.value(s.root, 0) {
		return nil, false
	}
	c.skipSpace()
	if c.pos != len(c.src) {
		return nil, false
	}
	return c.out, true
}

func (c *streamChecker) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *streamChecker) peek() byte {
	if c.pos < len(c.src) {
		return c.src[c.pos]
	}
	return 0
}

// expect consumes b after optional whitespace.
func (c *streamChecker) expect(b byte) bool {
	c.skipSpace()
	if c.peek() != b {
		return false
	}
	c.pos++
	c.skipSpace()
	return true
}

// value checks one value against n; depth counts enclosing containers (R8).
func (c *streamChecker) value(n *node, depth int) bool {
	if depth > MaxJSONDepth {
		return false
	}
	switch n.kind {
	case kindBoolean:
		return c.boolean()
	case kindInteger:
		v, ok := c.integer()
		if !ok || v < n.min || v > n.max {
			return false
		}
		c.out = append(c.out, c.src[c.lastNum:c.pos]...)
		return true
	case kindConst:
		return c.literal(n.lit, nil)
	case kindEnum:
		return c.literal(Value{}, n.values)
	case kindObject:
		return c.object(n, depth)
	case kindTuple, kindArray:
		return c.array(n, depth)
	}
	return c.union(n, depth)
}

func (c *streamChecker) word(w string) bool {
	if len(c.src)-c.pos < len(w) || c.src[c.pos:c.pos+len(w)] != w {
		return false
	}
	c.pos += len(w)
	return true
}

func (c *streamChecker) boolean() bool {
	switch c.peek() {
	case 't':
		if c.word("true") {
			c.out = append(c.out, "true"...)
			return true
		}
	case 'f':
		if c.word("false") {
			c.out = append(c.out, "false"...)
			return true
		}
	}
	return false
}

// integer reads an exact integer (R6); its text is canonical when accepted.
func (c *streamChecker) integer() (int64, bool) {
	start := c.pos
	neg := false
	if c.peek() == '-' {
		neg = true
		c.pos++
	}
	d := c.pos
	for c.pos < len(c.src) && isDigit(c.src[c.pos]) {
		c.pos++
	}
	digits := c.src[d:c.pos]
	if len(digits) == 0 || len(digits) > 16 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	if b := c.peek(); b == '.' || b == 'e' || b == 'E' {
		return 0, false
	}
	var v int64
	for _, ch := range digits {
		v = v*10 + int64(ch-'0')
	}
	if v > MaxSafeInteger || (neg && v == 0) {
		return 0, false
	}
	if neg {
		v = -v
	}
	c.lastNum = start
	return v, true
}

// decoded is a string just read: a substring of the input, or, when it had
// escapes, its decoding in the checker's scratch buffer (valid until the next
// string is read).
type decoded struct {
	s   string
	b   []byte
	esc bool
}

// eq compares without allocating.
func (d decoded) eq(t string) bool {
	if d.esc {
		return string(d.b) == t
	}
	return d.s == t
}

// str reads a string.
func (c *streamChecker) str() (decoded, bool) {
	if c.peek() != '"' {
		return decoded{}, false
	}
	c.pos++
	start := c.pos
	for c.pos < len(c.src) {
		ch := c.src[c.pos]
		if ch == '"' {
			c.pos++
			return decoded{s: c.src[start : c.pos-1]}, true
		}
		if ch == '\\' || ch < 0x20 {
			break
		}
		c.pos++
	}
	// Escapes: decode with the tree parser's own rules.
	p := parser{src: c.src, pos: start - 1}
	var err error
	if c.buf, err = p.appendStr(c.buf[:0]); err != nil {
		return decoded{}, false
	}
	c.pos = p.pos
	return decoded{b: c.buf, esc: true}, true
}

// literal reads a scalar and checks it against lit (const) or values (enum),
// writing the schema's literal.
func (c *streamChecker) literal(lit Value, values []Member) bool {
	var got Value
	switch c.peek() {
	case '"':
		d, ok := c.str()
		if !ok {
			return false
		}
		return c.matchLiteral(Value{kind: KindString}, d, lit, values)
	case 't', 'f':
		got = Value{kind: KindBool}
		if c.word("true") {
			got.n = 1
		} else if !c.word("false") {
			return false
		}
	case 'n':
		if !c.word("null") {
			return false
		}
		got = Value{kind: KindNull}
	default:
		v, ok := c.integer()
		if !ok {
			return false
		}
		got = Value{kind: KindInteger, n: v}
	}
	return c.matchLiteral(got, decoded{}, lit, values)
}

// matchLiteral compares got (for strings: its kind, with the text in d) with
// the candidates and writes the match.
func (c *streamChecker) matchLiteral(got Value, d decoded, lit Value, values []Member) bool {
	eq := func(l Value) bool {
		if got.kind != l.kind {
			return false
		}
		if got.kind == KindString {
			return d.eq(l.s)
		}
		return equalLiteral(got, l)
	}
	if values == nil {
		if !eq(lit) {
			return false
		}
		c.out = lit.AppendCompact(c.out)
		return true
	}
	for i := range values {
		if eq(values[i].Value) {
			c.out = values[i].Value.AppendCompact(c.out)
			return true
		}
	}
	return false
}

type span struct{ a, b int }

func (c *streamChecker) object(n *node, depth int) bool {
	if c.peek() != '{' {
		return false
	}
	c.pos++
	c.skipSpace()
	start := len(c.out)
	var spans [MaxObjectFields]span
	var seen uint32
	count := 0
	for count < len(n.names) {
		if count > 0 && !c.expect(',') {
			return false
		}
		key, ok := c.str()
		if !ok || !c.expect(':') {
			return false
		}
		i := -1
		for j, name := range n.names {
			if key.eq(name) {
				i = j
				break
			}
		}
		if i < 0 || seen&(1<<i) != 0 {
			return false
		}
		seen |= 1 << i
		a := len(c.out)
		if !c.value(n.kids[i], depth+1) {
			return false
		}
		spans[i] = span{a, len(c.out)}
		count++
	}
	if !c.expect('}') {
		return false
	}
	// Reassemble in declaration order with keys: {"name":value,...}.
	c.tmp = append(c.tmp[:0], c.out[start:]...)
	c.out = append(c.out[:start], '{')
	for i, name := range n.names {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = appendIdentifier(c.out, name)
		c.out = append(c.out, ':')
		c.out = append(c.out, c.tmp[spans[i].a-start:spans[i].b-start]...)
	}
	c.out = append(c.out, '}')
	return true
}

func (c *streamChecker) array(n *node, depth int) bool {
	if c.peek() != '[' {
		return false
	}
	c.pos++
	c.skipSpace()
	want := n.length
	if n.kind == kindTuple {
		want = len(n.kids)
	}
	c.out = append(c.out, '[')
	for i := 0; i < want; i++ {
		if i > 0 {
			if !c.expect(',') {
				return false
			}
			c.out = append(c.out, ',')
		}
		kid := n.kids[0]
		if n.kind == kindTuple {
			kid = n.kids[i]
		}
		if !c.value(kid, depth+1) {
			return false
		}
	}
	if !c.expect(']') {
		return false
	}
	c.out = append(c.out, ']')
	return true
}

// union handles {"tag":…,"value":…} in either order. When "value" comes
// first its extent is found by skip, and it is checked once the tag is known
// by a second, strict pass over exactly that extent.
func (c *streamChecker) union(n *node, depth int) bool {
	if c.peek() != '{' {
		return false
	}
	c.pos++
	c.skipSpace()
	key, ok := c.str()
	if !ok || !c.expect(':') {
		return false
	}
	valueFirst := key.eq("value")
	vstart, vend := c.pos, 0
	if valueFirst {
		if !c.skip() {
			return false
		}
		c.skipSpace()
		vend = c.pos
		if !c.expect(',') {
			return false
		}
		if key, ok = c.str(); !ok || !key.eq("tag") || !c.expect(':') {
			return false
		}
	} else if !key.eq("tag") {
		return false
	}
	tag, ok := c.str()
	if !ok {
		return false
	}
	i := -1
	for j, name := range n.names {
		if tag.eq(name) {
			i = j
			break
		}
	}
	if i < 0 {
		return false
	}
	c.out = append(c.out, `{"tag":`...)
	c.out = appendIdentifier(c.out, n.names[i])
	c.out = append(c.out, `,"value":`...)
	if valueFirst {
		if !c.expect('}') {
			return false
		}
		after := c.pos
		c.pos = vstart
		if !c.value(n.kids[i], depth+1) {
			return false
		}
		if c.skipSpace(); c.pos != vend {
			return false
		}
		c.pos = after
		c.out = append(c.out, '}')
		return true
	}
	if !c.expect(',') {
		return false
	}
	if key, ok = c.str(); !ok || !key.eq("value") || !c.expect(':') {
		return false
	}
	if !c.value(n.kids[i], depth+1) || !c.expect('}') {
		return false
	}
	c.out = append(c.out, '}')
	return true
}

// skip moves past one value without checking it, stopping after a closing
// bracket that balances the first opening one, or at a ',' or '}' outside any
// bracket. It only finds an extent; the second pass checks every byte of it.
func (c *streamChecker) skip() bool {
	depth := 0
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case '"':
			c.pos++
			for c.pos < len(c.src) && c.src[c.pos] != '"' {
				if c.src[c.pos] == '\\' {
					c.pos++
				}
				c.pos++
			}
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return true
			}
			depth--
			if depth == 0 {
				c.pos++
				return true
			}
		case ',':
			if depth == 0 {
				return true
			}
		}
		c.pos++
	}
	return false
}
