package policy

import (
	"strconv"
	"strings"
)

// parseAction reads allow | kill | errno NAME from toks and returns how many
// tokens it used.
func (ps *parser) parseAction(toks []token, col int) (Action, int, bool) {
	if len(toks) == 0 {
		ps.errorf(col, "missing action")
		return Action{}, 0, false
	}
	switch toks[0].text {
	case "allow":
		return Action{Kind: ActAllow}, 1, true
	case "kill":
		return Action{Kind: ActKill}, 1, true
	case "errno":
		if len(toks) < 2 {
			ps.errorf(toks[0].col, "errno needs a name such as EPERM")
			return Action{}, 0, false
		}
		e, ok := errnoByName(toks[1].text)
		if !ok {
			ps.errorf(toks[1].col, "unknown errno %q", toks[1].text)
			return Action{}, 0, false
		}
		return Action{Kind: ActErrno, Errno: e}, 2, true
	}
	ps.errorf(toks[0].col, "unknown action %q (want allow, kill or errno NAME)", toks[0].text)
	return Action{}, 0, false
}

// parseRule reads ACTION SYSCALL [if COND {&& COND}] [+sensitive].
func (ps *parser) parseRule(toks []token, endCol int) (Rule, bool) {
	r := Rule{Line: ps.line, Group: ps.group}
	act, n, ok := ps.parseAction(toks, toks[0].col)
	if !ok {
		return r, false
	}
	r.Action = act
	toks = toks[n:]
	if len(toks) == 0 {
		ps.errorf(endCol, "missing system call name")
		return r, false
	}
	name := toks[0]
	if !syscallNameRE().MatchString(name.text) {
		ps.errorf(name.col, "%q is not a system call name", name.text)
		return r, false
	}
	r.Syscall, r.Col = name.text, name.col
	if ps.group == "" {
		ps.errorf(name.col, "rule outside any group: start one with 'group NAME : DESCRIPTION'")
		return r, false
	}
	known := false
	for _, a := range ps.arches {
		if _, ok := syscallNumber(name.text, a); ok {
			known = true
		}
	}
	if !known && ps.seenArch {
		ps.errorf(name.col, "unknown system call %q on %s", name.text, strings.Join(ps.p.Arches, ", "))
		return r, false
	}
	toks = toks[1:]
	if len(toks) > 0 && toks[0].text == "if" {
		conds, rest, ok := ps.parseConds(toks[1:], toks[0].col, r.Syscall)
		if !ok {
			return r, false
		}
		r.Conds, toks = conds, rest
	}
	for len(toks) > 0 {
		if toks[0].text == "+" && len(toks) > 1 && toks[1].text == "sensitive" {
			if r.Sensitive {
				ps.errorf(toks[0].col, "+sensitive given twice")
				return r, false
			}
			r.Sensitive = true
			toks = toks[2:]
			continue
		}
		ps.errorf(toks[0].col, "unexpected %q (want 'if', '+sensitive' or ': REASON')", toks[0].text)
		return r, false
	}
	return r, true
}

// parseConds reads COND {&& COND} and returns the tokens after them.
func (ps *parser) parseConds(toks []token, col int, syscall string) ([]Cond, []token, bool) {
	var conds []Cond
	seen := map[uint]bool{}
	multi := false
	for {
		if len(toks) == 0 {
			ps.errorf(col, "missing condition after 'if'")
			return nil, nil, false
		}
		c, rest, ok := ps.parseCond(toks)
		if !ok {
			return nil, nil, false
		}
		if seen[c.Arg] {
			ps.errorf(toks[0].col, "arg%d is compared twice; use one condition per argument", c.Arg)
			return nil, nil, false
		}
		if len(c.Values) > 1 {
			if multi {
				ps.errorf(toks[0].col, "only one 'in {...}' condition per rule")
				return nil, nil, false
			}
			multi = true
		}
		seen[c.Arg] = true
		conds = append(conds, c)
		toks = rest
		if len(toks) > 0 && toks[0].text == "&&" {
			col = toks[0].col
			toks = toks[1:]
			continue
		}
		return conds, toks, true
	}
}

// parseCond reads argN [& MASK] OP VALUE | argN [& MASK] in {VALUE, ...}.
func (ps *parser) parseCond(toks []token) (Cond, []token, bool) {
	var c Cond
	m := argRE().FindStringSubmatch(toks[0].text)
	if m == nil {
		ps.errorf(toks[0].col, "expected arg0..arg5, got %q", toks[0].text)
		return c, nil, false
	}
	c.Arg = uint(m[1][0] - '0')
	toks = toks[1:]
	if len(toks) > 0 && toks[0].text == "&" {
		v, _, rest, ok := ps.parseValue(toks[1:], toks[0].col)
		if !ok {
			return c, nil, false
		}
		c.HasMask, c.Mask, toks = true, v, rest
	}
	if len(toks) == 0 {
		ps.errorf(ps.col(len(ps.text)), "missing comparison after arg%d", c.Arg)
		return c, nil, false
	}
	opTok := toks[0]
	toks = toks[1:]
	if opTok.text == "in" {
		if len(toks) == 0 || toks[0].text != "{" {
			ps.errorf(opTok.col, "'in' needs a list: in {A, B}")
			return c, nil, false
		}
		toks = toks[1:]
		c.Op = OpEq
		for {
			v, name, rest, ok := ps.parseValue(toks, opTok.col)
			if !ok {
				return c, nil, false
			}
			for _, old := range c.Values {
				if old == v {
					ps.errorf(toks[0].col, "value %#x listed twice", v)
					return c, nil, false
				}
			}
			c.Values, c.Names, toks = append(c.Values, v), append(c.Names, name), rest
			if len(toks) == 0 {
				ps.errorf(opTok.col, "unterminated list: missing '}'")
				return c, nil, false
			}
			if toks[0].text == "," {
				toks = toks[1:]
				continue
			}
			if toks[0].text == "}" {
				toks = toks[1:]
				break
			}
			ps.errorf(toks[0].col, "expected ',' or '}', got %q", toks[0].text)
			return c, nil, false
		}
	} else {
		op := Op(0)
		for o, s := range opText {
			if s == opTok.text {
				op = o
			}
		}
		if op == 0 {
			ps.errorf(opTok.col, "expected a comparison (==, !=, <, <=, >, >=, in), got %q", opTok.text)
			return c, nil, false
		}
		v, name, rest, ok := ps.parseValue(toks, opTok.col)
		if !ok {
			return c, nil, false
		}
		c.Op, c.Values, c.Names, toks = op, []uint64{v}, []string{name}, rest
	}
	if c.HasMask {
		if c.Op != OpEq {
			ps.errorf(opTok.col, "a masked comparison must use == or in")
			return c, nil, false
		}
		for _, v := range c.Values {
			if v&^c.Mask != 0 {
				ps.errorf(opTok.col, "value %#x has bits outside the mask %#x and can never match", v, c.Mask)
				return c, nil, false
			}
		}
	}
	return c, toks, true
}

// parseValue reads TERM {| TERM} where TERM is a number or a known constant.
// name is the symbolic spelling, "" if any term was a number.
func (ps *parser) parseValue(toks []token, col int) (uint64, string, []token, bool) {
	var v uint64
	var names []string
	symbolic := true
	for {
		if len(toks) == 0 {
			ps.errorf(col, "missing value")
			return 0, "", nil, false
		}
		t := toks[0]
		switch {
		case t.text[0] >= '0' && t.text[0] <= '9':
			n, err := strconv.ParseUint(t.text, 0, 64)
			if err != nil {
				ps.errorf(t.col, "bad number %q", t.text)
				return 0, "", nil, false
			}
			v |= n
			symbolic = false
		case constNameRE().MatchString(t.text):
			n, ok := lookupConstant(t.text)
			if !ok {
				ps.errorf(t.col, "unknown constant %q", t.text)
				return 0, "", nil, false
			}
			v |= n
			names = append(names, t.text)
		default:
			ps.errorf(t.col, "expected a number or a constant, got %q", t.text)
			return 0, "", nil, false
		}
		toks = toks[1:]
		if len(toks) > 0 && toks[0].text == "|" {
			col = toks[0].col
			toks = toks[1:]
			continue
		}
		name := ""
		if symbolic {
			name = strings.Join(names, "|")
		}
		return v, name, toks, true
	}
}
