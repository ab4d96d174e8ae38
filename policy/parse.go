package policy

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// maxPolicyBytes bounds what Parse accepts; real policies are a few KiB.
const maxPolicyBytes = 1 << 20

var (
	syscallNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_]*$`) })
	groupNameRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]*$`) })
	constNameRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`) })
	argRE         = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^arg([0-5])$`) })
)

// parser holds the state of one parse.
type parser struct {
	file      string
	p         *Policy
	errs      ParseErrors
	line      int
	text      string
	group     string
	seenVer   bool
	seenDef   bool
	seenArch  bool
	seenScope bool
	groups    map[string]bool
	arches    []archInfo
}

func (ps *parser) errorf(col int, format string, args ...any) {
	ps.errs = append(ps.errs, &ParseError{File: ps.file, Line: ps.line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

// parse reads a whole file, collecting every error.
func parse(name string, src []byte) (*Policy, ParseErrors) {
	ps := &parser{file: name, p: &Policy{Name: name}, groups: map[string]bool{}}
	if len(src) > maxPolicyBytes {
		ps.line = 1
		ps.errorf(1, "policy is %d bytes; the limit is %d", len(src), maxPolicyBytes)
		return ps.p, ps.errs
	}
	if !utf8.Valid(src) {
		ps.line = 1
		ps.errorf(1, "policy is not valid UTF-8")
		return ps.p, ps.errs
	}
	lines := strings.Split(string(src), "\n")
	for i, line := range lines {
		ps.line = i + 1
		ps.text = line
		ps.parseLine(line)
	}
	ps.line = len(lines)
	if !ps.seenVer {
		ps.errorf(1, "missing header line: version N")
	}
	if !ps.seenDef {
		ps.errorf(1, "missing header line: default ACTION : REASON")
	}
	if !ps.seenArch {
		ps.errorf(1, "missing header line: arch NAME...")
	}
	if ps.seenArch {
		ps.checkRules()
	}
	sort.SliceStable(ps.errs, func(i, j int) bool {
		a, b := ps.errs[i], ps.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	// The partial policy lets lint review the rules that did parse.
	return ps.p, ps.errs
}

func (ps *parser) col(off int) int { return utf8.RuneCountInString(ps.text[:off]) + 1 }

func (ps *parser) parseLine(line string) {
	body := line
	if i := strings.IndexByte(body, '#'); i >= 0 {
		body = body[:i]
	}
	if strings.TrimSpace(body) == "" {
		return
	}
	head, reason, hasReason := body, "", false
	reasonCol := 0
	if i := strings.IndexByte(body, ':'); i >= 0 {
		head, reason, hasReason = body[:i], strings.Join(strings.Fields(body[i+1:]), " "), true
		reasonCol = ps.col(i)
	}
	toks, perr := lexLine(line, 0, head)
	if perr != nil {
		ps.errorf(perr.Col, "%s", perr.Msg)
		return
	}
	if len(toks) == 0 {
		ps.errorf(ps.col(0), "missing directive before ':'")
		return
	}
	endCol := ps.col(len(strings.TrimRight(body, " \t\r")))
	needReason := func(what string) bool {
		if !hasReason || reason == "" {
			if hasReason {
				ps.errorf(reasonCol, "missing reason after ':' for %s", what)
			} else {
				ps.errorf(endCol, "missing reason: %s needs ': REASON'", what)
			}
			return false
		}
		return true
	}
	noReason := func() bool {
		if hasReason {
			ps.errorf(reasonCol, "unexpected ':' after %s", toks[0].text)
			return false
		}
		return true
	}
	switch kw := toks[0]; kw.text {
	case "version":
		if !noReason() {
			return
		}
		ps.parseVersion(kw, toks[1:])
	case "arch":
		if !noReason() {
			return
		}
		ps.parseArch(kw, toks[1:])
	case "default":
		if !needReason("the default action") {
			return
		}
		ps.parseDefault(kw, toks[1:], reason)
	case "scope":
		if !needReason("the scope") {
			return
		}
		ps.parseScope(kw, toks[1:], reason)
	case "group":
		if !needReason("a group") {
			return
		}
		ps.parseGroup(kw, toks[1:], reason)
	case "allow", "kill", "errno":
		r, ok := ps.parseRule(toks, endCol)
		if !ok {
			return
		}
		if !needReason("rule " + r.Action.String() + " " + r.Syscall) {
			return
		}
		r.Reason = reason
		ps.p.Rules = append(ps.p.Rules, r)
	default:
		ps.errorf(kw.col, "unknown directive or action %q (want version, default, arch, scope, group, allow, kill or errno)", kw.text)
	}
}

func (ps *parser) parseVersion(kw token, rest []token) {
	if ps.seenVer {
		ps.errorf(kw.col, "duplicate version line")
		return
	}
	if len(rest) != 1 {
		ps.errorf(kw.col, "version takes one number")
		return
	}
	v, err := strconv.Atoi(rest[0].text)
	if err != nil || v < 1 {
		ps.errorf(rest[0].col, "version %q is not a positive integer", rest[0].text)
		return
	}
	ps.seenVer = true
	ps.p.Version = v
}

func (ps *parser) parseArch(kw token, rest []token) {
	if ps.seenArch {
		ps.errorf(kw.col, "duplicate arch line")
		return
	}
	if len(rest) == 0 {
		ps.errorf(kw.col, "arch needs at least one architecture")
		return
	}
	ok := true
	for _, t := range rest {
		a, err := lookupArch(t.text)
		if err != nil {
			ps.errorf(t.col, "%v", err)
			ok = false
			continue
		}
		if ps.p.HasArch(a.name) {
			ps.errorf(t.col, "architecture %s listed twice", a.name)
			ok = false
			continue
		}
		ps.p.Arches = append(ps.p.Arches, a.name)
		ps.arches = append(ps.arches, a)
	}
	ps.seenArch = ok
}

func (ps *parser) parseDefault(kw token, rest []token, reason string) {
	if ps.seenDef {
		ps.errorf(kw.col, "duplicate default line")
		return
	}
	act, n, ok := ps.parseAction(rest, kw.col)
	if !ok {
		return
	}
	if n != len(rest) {
		ps.errorf(rest[n].col, "unexpected %q after the default action", rest[n].text)
		return
	}
	if act.Kind == ActAllow {
		ps.errorf(rest[0].col, "default allow is not a sandbox: use kill or errno NAME")
		return
	}
	ps.seenDef = true
	ps.p.DefaultAction = act
	ps.p.DefaultReason = reason
	ps.p.defaultLine = ps.line
}

func (ps *parser) parseGroup(kw token, rest []token, desc string) {
	if len(rest) != 1 || !groupNameRE().MatchString(rest[0].text) {
		ps.errorf(kw.col, "group takes one lower-case name (letters, digits, '-')")
		return
	}
	name := rest[0].text
	if ps.groups[name] {
		ps.errorf(rest[0].col, "duplicate group %q", name)
		return
	}
	if !ps.seenVer || !ps.seenDef || !ps.seenArch {
		ps.errorf(kw.col, "the header (version, default, arch) must come before the first group")
	}
	ps.groups[name] = true
	ps.group = name
	ps.p.Groups = append(ps.p.Groups, Group{Name: name, Description: desc, Line: ps.line})
}

// parseScope reads the optional header line "scope NAME : REASON", which
// says the policy is not for a query script (scope.go). It must come
// before the first group, so that every rule is checked under it.
func (ps *parser) parseScope(kw token, rest []token, reason string) {
	if ps.seenScope {
		ps.errorf(kw.col, "duplicate scope line")
		return
	}
	if len(rest) != 1 || !scopes[rest[0].text] {
		ps.errorf(kw.col, "scope takes one name: %s (a policy without a scope line is for query scripts)", ScopeEnclaveLoop)
		return
	}
	if len(ps.p.Groups) > 0 {
		ps.errorf(kw.col, "the scope line must come before the first group")
		return
	}
	ps.seenScope = true
	ps.p.Scope = rest[0].text
	ps.p.ScopeReason = reason
}
