package agentloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of the provider-response decoder.
const (
	// maxTreeDepth bounds nesting of a provider response.
	maxTreeDepth = 64
	// maxTreeNodes bounds the values of one response, so a response of many
	// tiny values cannot cost more than a bounded amount of memory.
	maxTreeNodes = 1 << 17
)

// jkind is the JSON type of a tree node.
type jkind uint8

const (
	jNull jkind = iota + 1
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	switch k {
	case jNull:
		return "null"
	case jBool:
		return "boolean"
	case jNumber:
		return "number"
	case jString:
		return "string"
	case jArray:
		return "array"
	case jObject:
		return "object"
	}
	return "invalid"
}

// jnode is one value of a strictly decoded provider response. Provider
// responses are larger than proto.ParseJSON accepts and may carry
// fractional numbers in fields the loop never reads, so they get their own
// decoder; it is just as strict about ambiguity: valid UTF-8, one value, no
// duplicate keys (not even ones equal under case folding), bounded depth,
// and lookups by exact key only (encoding/json's struct decoding would
// match keys case-insensitively).
type jnode struct {
	kind jkind
	b    bool
	s    string // string value, or the number's text
	keys []string
	kids []*jnode // object values (parallel to keys) or array items
}

// decodeTree decodes b as exactly one strict JSON value.
func decodeTree(b []byte) (*jnode, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("response is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n := 0
	v, err := treeValue(dec, 0, &n)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("content after the JSON value")
	}
	return v, nil
}

func treeValue(dec *json.Decoder, depth int, count *int) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if *count++; *count > maxTreeNodes {
		return nil, fmt.Errorf("more than %d JSON values", maxTreeNodes)
	}
	switch t := tok.(type) {
	case nil:
		return &jnode{kind: jNull}, nil
	case bool:
		return &jnode{kind: jBool, b: t}, nil
	case json.Number:
		return &jnode{kind: jNumber, s: t.String()}, nil
	case string:
		return &jnode{kind: jString, s: t}, nil
	case json.Delim:
		if depth >= maxTreeDepth {
			return nil, fmt.Errorf("nesting deeper than %d", maxTreeDepth)
		}
		n := &jnode{}
		switch t {
		case '{':
			n.kind = jObject
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("not JSON: %w", err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("not JSON: object key is not a string")
				}
				for _, prev := range n.keys {
					if strings.EqualFold(prev, k) {
						return nil, fmt.Errorf("duplicate key %s", strconv.QuoteToASCII(clipString(k, 64)))
					}
				}
				kid, err := treeValue(dec, depth+1, count)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k)
				n.kids = append(n.kids, kid)
			}
		case '[':
			n.kind = jArray
			for dec.More() {
				kid, err := treeValue(dec, depth+1, count)
				if err != nil {
					return nil, err
				}
				n.kids = append(n.kids, kid)
			}
		default:
			return nil, fmt.Errorf("not JSON: unexpected %q", t)
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		return n, nil
	}
	return nil, fmt.Errorf("not JSON: unexpected token %T", tok)
}

// get returns the member of an object under exactly key.
func (n *jnode) get(key string) (*jnode, bool) {
	if n == nil || n.kind != jObject {
		return nil, false
	}
	for i, k := range n.keys {
		if k == key {
			return n.kids[i], true
		}
	}
	return nil, false
}

// field returns the member under key
// if it exists with one of the kinds given (a missing member is reported as
// absent, not as an error).
func (n *jnode) field(key string, kinds ...jkind) (*jnode, bool, error) {
	v, ok := n.get(key)
	if !ok {
		return nil, false, nil
	}
	for _, k := range kinds {
		if v.kind == k {
			return v, true, nil
		}
	}
	return nil, true, fmt.Errorf("%s is %s, not %s", key, v.kind, kinds[0])
}

// str returns a required string member.
func (n *jnode) str(key string) (string, error) {
	v, ok, err := n.field(key, jString)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s is missing", key)
	}
	return v.s, nil
}

// tokens returns a required non-negative integer member (a token count).
func (n *jnode) tokens(key string) (int64, error) {
	v, ok, err := n.field(key, jNumber)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%s is missing", key)
	}
	t, err := strconv.ParseInt(v.s, 10, 64)
	if err != nil || t < 0 || t > 1<<40 {
		return 0, fmt.Errorf("%s is not a token count", key)
	}
	return t, nil
}

// appendJSON writes n as compact JSON, keys in input order.
func (n *jnode) appendJSON(dst []byte) []byte {
	switch n.kind {
	case jNull:
		return append(dst, "null"...)
	case jBool:
		return strconv.AppendBool(dst, n.b)
	case jNumber:
		return append(dst, n.s...)
	case jString:
		b, _ := json.Marshal(n.s)
		return append(dst, b...)
	case jArray:
		dst = append(dst, '[')
		for i, k := range n.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = k.appendJSON(dst)
		}
		return append(dst, ']')
	case jObject:
		dst = append(dst, '{')
		for i, k := range n.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			b, _ := json.Marshal(n.keys[i])
			dst = append(dst, b...)
			dst = append(dst, ':')
			dst = k.appendJSON(dst)
		}
		return append(dst, '}')
	}
	return dst
}

// clipString cuts s to at most n bytes at a rune boundary.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
