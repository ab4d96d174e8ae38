package proto

import "strconv"

// AppendCompact appends the compact serialisation of v (CONTRACT.md R10):
// object members in input order, no whitespace, strings escaped as
// ECMAScript JSON.stringify escapes them.
func (v Value) AppendCompact(dst []byte) []byte {
	switch v.kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		if v.n != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case KindInteger:
		return strconv.AppendInt(dst, v.n, 10)
	case KindString:
		if v.plain {
			dst = append(dst, '"')
			dst = append(dst, v.s...)
			return append(dst, '"')
		}
		return appendString(dst, v.s)
	case KindArray:
		dst = append(dst, '[')
		for i := range v.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = v.kids[i].Value.AppendCompact(dst)
		}
		return append(dst, ']')
	case KindObject:
		dst = append(dst, '{')
		for i := range v.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, v.kids[i].Key)
			dst = append(dst, ':')
			dst = v.kids[i].Value.AppendCompact(dst)
		}
		return append(dst, '}')
	}
	return dst
}

// compactLen returns len(v.AppendCompact(nil)) without building it.
func (v Value) compactLen() int {
	switch v.kind {
	case KindNull, KindBool:
		if v.kind == KindBool && v.n == 0 {
			return 5
		}
		return 4
	case KindInteger:
		var buf [24]byte
		return len(strconv.AppendInt(buf[:0], v.n, 10))
	case KindString:
		if v.plain {
			return len(v.s) + 2
		}
		return stringLen(v.s)
	}
	n := 2 + max(len(v.kids)-1, 0)
	for i := range v.kids {
		if v.kind == KindObject {
			n += stringLen(v.kids[i].Key) + 1
		}
		n += v.kids[i].Value.compactLen()
	}
	return n
}

// stringLen returns the length of appendString(nil, s).
func stringLen(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

// CompactJSON parses src strictly and returns its compact serialisation.
func CompactJSON(src []byte) ([]byte, error) {
	v, err := ParseJSON(src)
	if err != nil {
		return nil, err
	}
	return v.AppendCompact(make([]byte, 0, len(src))), nil
}

const hexDigits = "0123456789abcdef"

// appendIdentifier writes a field name or union tag (R25), which never needs
// escaping.
func appendIdentifier(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendString writes s as a JSON string the way ECMAScript JSON.stringify
// does for well-formed strings: escape '"', '\\' and C0 controls (short forms
// \b \t \n \f \r, otherwise \u00xx in lowercase hex); everything else,
// including '/', '<', '>', '&', DEL, U+2028 and U+2029, is written raw.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
