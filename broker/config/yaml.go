package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// A YAML configuration means exactly what its JSON translation means: the
// YAML reader below turns a document into the tree DecodeJSON produces
// (map[string]any, []any, string, json.Number, bool, nil) and the one loader
// checks that tree. Everything YAML has and JSON lacks is refused rather
// than interpreted, so that no reader of the file, human or program, can
// take it to mean something else: anchors and aliases, tags (!!str, !foo,
// and the bare !), merge keys (<<), keys that are not strings, more than one
// document, a byte order mark, bytes that are not UTF-8, and line breaks
// other than LF and CRLF (the parser's lone CR, NEL, LS and PS would make
// every reported position, and the check for the bare tag, count lines
// differently from the reader's editor).
//
// Plain (unquoted) scalars are where YAML versions and parsers disagree
// most: YAML 1.1 reads yes, no, on, off, y and n as booleans, 017 as octal,
// 1:30 as base 60, and 2024-01-01 as a timestamp; YAML 1.2 reads none of
// those that way. So a plain scalar is true, false, null (also ~ or an empty
// value), a number written as JSON writes it (kept as its exact text, like
// the JSON reader's json.Number), or a string that every YAML version reads
// as a string. Anything else is an error that says to quote it.

// Problem is one thing wrong with a YAML configuration, and where it is.
type Problem struct {
	// Line and Column are 1-based; Column counts characters. Column is 0
	// when the YAML parser reports the line only, Line is 0 when it reports
	// neither.
	Line, Column int
	// Path is the JSON path the loader names ("boundedQueries.timeout");
	// "" for a problem of the document's syntax.
	Path string
	// Msg says what is wrong.
	Msg string
}

// String is "LINE:COLUMN: PATH: MSG", leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.Line > 0 && p.Column > 0:
		fmt.Fprintf(&b, "%d:%d: ", p.Line, p.Column)
	case p.Line > 0:
		fmt.Fprintf(&b, "%d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// YAMLError is the error of every YAML configuration that does not load.
type YAMLError struct {
	// Name is the file the document came from ("-" for standard input);
	// "" when the caller gave none.
	Name string
	// Problems has at least one element. A document the YAML reader refuses
	// has exactly one; the loader reports every problem it finds.
	Problems []Problem
}

func (e *YAMLError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
		if e.Name != "" && p.Line > 0 {
			parts[i] = e.Name + ":" + parts[i]
		}
	}
	return "config: " + strings.Join(parts, "; ")
}

// DecodeYAML parses one YAML document into the tree DecodeJSON would give
// for its JSON translation, refusing every construct that has none (see the
// comment at the top of this file). Errors are *YAMLError.
func DecodeYAML(src []byte) (any, error) {
	tree, _, err := decodeYAML(src)
	return tree, err
}

// LoadYAML parses and checks a YAML configuration document. It accepts
// exactly the documents whose JSON translation Load accepts, and gives the
// same Config; its errors are *YAMLError, each problem with its line and
// column.
func LoadYAML(src []byte) (*Config, error) {
	tree, at, err := decodeYAML(src)
	if err != nil {
		return nil, err
	}
	c, errs := loadTree(tree)
	if len(errs) > 0 {
		e := &YAMLError{}
		for _, s := range errs {
			e.Problems = append(e.Problems, at.locate(s))
		}
		return nil, e
	}
	return c, nil
}

// loadTree runs the loader on a decoded tree, as Load does after DecodeJSON.
func loadTree(tree any) (*Config, []string) {
	l := &loader{}
	c := l.config(tree)
	return c, l.errs
}

// pos is a 1-based line and character column.
type pos struct{ line, col int }

// yamlIndex maps the loader's paths ("config", "agent.user",
// "boundedQueries.privateRepos[0]") to where in the document each value,
// and the key that names it, starts.
type yamlIndex struct {
	values, keys map[string]pos
}

// locate turns one loader error, "PATH: MSG", into a Problem at the place it
// is about: the key for an unknown key, else the value at PATH, else (for a
// required key that is missing) the nearest enclosing value.
func (x yamlIndex) locate(s string) Problem {
	path, msg, ok := strings.Cut(s, ": ")
	if !ok {
		return Problem{Msg: s}
	}
	p := Problem{Path: path, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "unknown key "); ok {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			if k, err := strconv.Unquote(q); err == nil {
				if at, ok := x.keys[childPath(path, k)]; ok {
					p.Line, p.Column = at.line, at.col
					return p
				}
			}
		}
	}
	for q := path; q != ""; q = parentPath(q) {
		if at, ok := x.values[q]; ok {
			p.Line, p.Column = at.line, at.col
			break
		}
	}
	return p
}

// childPath is the loader's path of key k in the object at path: the
// top-level object is "config", its members are named by their key alone.
func childPath(path, k string) string {
	if path == "config" {
		return k
	}
	return path + "." + k
}

// parentPath strips the last ".key" or "[i]" from a loader path; the parent
// of a top-level key is "config", and "config" has none.
func parentPath(p string) string {
	if p == "config" {
		return ""
	}
	if i := strings.LastIndexAny(p, ".["); i > 0 {
		return p[:i]
	}
	return "config"
}

// decodeYAML is DecodeYAML that also returns where each value starts.
func decodeYAML(src []byte) (any, yamlIndex, error) {
	x := yamlIndex{values: map[string]pos{}, keys: map[string]pos{}}
	fail := func(line, col int, format string, args ...any) (any, yamlIndex, error) {
		return nil, x, &YAMLError{Problems: []Problem{{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}}}
	}
	if len(src) > MaxConfigBytes {
		return fail(0, 0, "config is larger than %d bytes", MaxConfigBytes)
	}
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		return fail(1, 1, "a byte order mark is not allowed (JSON refuses it too)")
	}
	if !utf8.Valid(src) {
		off := 0
		for off < len(src) {
			r, n := utf8.DecodeRune(src[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		line, col := charPos(src, off)
		return fail(line, col, "the document is not valid UTF-8")
	}
	// The parser also breaks lines at a lone CR, NEL, LS and PS; the
	// positions here (and every editor's) count LF only.
	if off := oddLineBreak(src); off >= 0 {
		line, col := charPos(src, off)
		r, _ := utf8.DecodeRune(src[off:])
		return fail(line, col, "line breaks other than LF and CRLF are not allowed (U+%04X)", r)
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(0, 0, "the document is empty")
		}
		return nil, x, syntaxError(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return fail(next.Line, next.Column, "a second document starts here; a configuration is one document")
	case !errors.Is(err, io.EOF):
		return nil, x, syntaxError(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return fail(doc.Line, doc.Column, "the document is empty")
	}
	w := &yamlWalker{src: src, at: x}
	tree, err := w.value(doc.Content[0], "config", 0)
	if err != nil {
		return nil, x, err
	}
	return tree, x, nil
}

// yamlLine finds the line number in the parser's messages ("yaml: line 3:
// did not find expected key"); it reports no column.
var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line ([0-9]+): `) })

func syntaxError(err error) error {
	msg := err.Error()
	p := Problem{Msg: msg}
	if m := yamlLine().FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Msg = "invalid YAML: " + msg[len(m[0]):]
	} else {
		p.Msg = "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
	}
	return &YAMLError{Problems: []Problem{p}}
}

// oddLineBreak is the offset of the first CR not followed by LF, NEL, LS or
// PS in src, or -1.
func oddLineBreak(src []byte) int {
	for i, r := range string(src) {
		switch {
		case r == '\r' && (i+1 == len(src) || src[i+1] != '\n'),
			r == '\u0085', r == '\u2028', r == '\u2029':
			return i
		}
	}
	return -1
}

// charPos is the 1-based line and character column of byte offset off.
func charPos(src []byte, off int) (line, col int) {
	before := src[:off]
	start := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte("\n")) + 1, utf8.RuneCount(before[start:]) + 1
}

// yamlWalker converts a yaml.Node tree, refusing what JSON cannot say.
type yamlWalker struct {
	src   []byte
	lines []int         // byte offset of each line's start, built on first use
	runes map[int][]int // byte offset of each character of a line; nil if ASCII
	at    yamlIndex
}

func (w *yamlWalker) fail(n *yaml.Node, path, format string, args ...any) error {
	p := Problem{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
	if path != "config" {
		p.Path = path
	}
	return &YAMLError{Problems: []Problem{p}}
}

// properties refuses a node that has an anchor, is an alias, or carries a
// tag. The parser resolves the non-specific tag "!" away without a trace in
// the node, so the source is read too: a node's position is where its
// properties start, and no node without a tag starts with "!".
func (w *yamlWalker) properties(n *yaml.Node, path string) error {
	switch {
	case n.Kind == yaml.AliasNode:
		return w.fail(n, path, "aliases are not allowed (*%s); write the value out", n.Value)
	case n.Anchor != "":
		return w.fail(n, path, "anchors are not allowed (&%s)", n.Anchor)
	case n.Style&yaml.TaggedStyle != 0:
		return w.fail(n, path, "tags are not allowed (%s)", n.Tag)
	}
	if tag, ok := w.tagAt(n.Line, n.Column); ok {
		return w.fail(n, path, "tags are not allowed (%s)", tag)
	}
	return nil
}

// tagAt returns the tag written at a 1-based line and character column.
func (w *yamlWalker) tagAt(line, col int) (string, bool) {
	off, ok := w.offset(line, col)
	if !ok || w.src[off] != '!' {
		return "", false
	}
	rest := w.src[off:]
	end := bytes.IndexAny(rest, " \t\r\n")
	if end < 0 {
		end = len(rest)
	}
	return string(rest[:end]), true
}

// offset converts a 1-based line and character column to a byte offset in
// constant time for ASCII lines (a line's character offsets are computed
// once otherwise), so that a long one-line document costs linear time.
func (w *yamlWalker) offset(line, col int) (int, bool) {
	if w.lines == nil {
		w.lines = []int{0}
		for i, c := range w.src {
			if c == '\n' {
				w.lines = append(w.lines, i+1)
			}
		}
		w.runes = map[int][]int{}
	}
	if line < 1 || line > len(w.lines) || col < 1 {
		return 0, false
	}
	start, end := w.lines[line-1], len(w.src)
	if line < len(w.lines) {
		end = w.lines[line] - 1
	}
	text := w.src[start:end]
	starts, ok := w.runes[line]
	if !ok {
		// nil marks an ASCII line, whose columns are byte offsets.
		if utf8.RuneCount(text) != len(text) {
			for i := range string(text) {
				starts = append(starts, i)
			}
		}
		w.runes[line] = starts
	}
	switch {
	case starts == nil && col <= len(text):
		return start + col - 1, true
	case starts != nil && col <= len(starts):
		return start + starts[col-1], true
	}
	return 0, false
}

func (w *yamlWalker) value(n *yaml.Node, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, w.fail(n, path, "nesting deeper than %d", maxDepth)
	}
	if err := w.properties(n, path); err != nil {
		return nil, err
	}
	w.at.values[path] = pos{n.Line, n.Column}
	switch n.Kind {
	case yaml.ScalarNode:
		v, err := scalar(n)
		if err != nil {
			return nil, w.fail(n, path, "%v", err)
		}
		return v, nil
	case yaml.SequenceNode:
		a := make([]any, 0, len(n.Content))
		for i, e := range n.Content {
			v, err := w.value(e, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		first := map[string]pos{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			k, err := w.key(kn, path)
			if err != nil {
				return nil, err
			}
			if at, dup := first[k]; dup {
				return nil, w.fail(kn, path, "duplicate key %q (first at %d:%d)", k, at.line, at.col)
			}
			first[k] = pos{kn.Line, kn.Column}
			cp := childPath(path, k)
			w.at.keys[cp] = pos{kn.Line, kn.Column}
			v, err := w.value(vn, cp, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	default:
		return nil, w.fail(n, path, "unexpected YAML node")
	}
}

// key returns a mapping key, which must be a string.
func (w *yamlWalker) key(n *yaml.Node, path string) (string, error) {
	if err := w.properties(n, path); err != nil {
		return "", err
	}
	if n.Kind != yaml.ScalarNode {
		return "", w.fail(n, path, "keys must be strings, not a %s", kindName(n.Kind))
	}
	if n.Style == 0 && n.Value == "<<" {
		return "", w.fail(n, path, "merge keys (<<) are not allowed; write the keys out")
	}
	v, err := scalar(n)
	if err != nil {
		return "", w.fail(n, path, "key: %v", err)
	}
	s, ok := v.(string)
	if !ok {
		return "", w.fail(n, path, "keys must be strings: %q is a %s; quote it", n.Value, jsonKind(v))
	}
	return s, nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	default:
		return "node"
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	default:
		return "string"
	}
}

var (
	// jsonNumber is RFC 8259's number grammar.
	jsonNumber = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)
	})
	// yaml11Number is what YAML 1.1 (and 1.2's core schema, which it
	// contains) reads as an int or a float: base 2, 8, 16 and 60,
	// underscores, a leading "+" or ".", infinities and NaN.
	yaml11Number = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+|[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	})
	// yaml11Bool is what YAML 1.1 reads as a boolean, in any case.
	yaml11Bool = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?i:y|yes|n|no|on|off|true|false)$`) })
)

// scalar converts a scalar node: quoted and block scalars are strings, plain
// ones follow the rule at the top of this file.
func scalar(n *yaml.Node) (any, error) {
	v := n.Value
	if !utf8.ValidString(v) {
		return nil, errors.New("the string is not valid UTF-8")
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return v, nil
	}
	switch {
	case v == "true":
		return true, nil
	case v == "false":
		return false, nil
	case v == "null" || v == "~" || v == "":
		return nil, nil
	case jsonNumber().MatchString(v):
		return json.Number(v), nil
	case yaml11Bool().MatchString(v):
		return nil, fmt.Errorf("plain %s is a boolean to some YAML readers and a string to others: write true or false, or quote it", v)
	case yaml11Number().MatchString(v):
		return nil, fmt.Errorf("plain %s is not a number as JSON writes one (30, 1.5, 3e1) and some YAML readers take it for one: write it as JSON does, or quote it", v)
	case n.Tag != "!!str":
		return nil, fmt.Errorf("plain %s is read as %s by YAML, not as a string: quote it (null, true and false are written as JSON writes them)", v, n.Tag)
	}
	return v, nil
}
