package odata

import (
	"fmt"
	"strings"
)

var reservedWords = map[string]bool{
	"and": true, "or": true, "not": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
	"in": true, "true": true, "false": true, "null": true,
}

var compareOps = map[string]bool{
	OpEq: true, OpNe: true, OpLt: true, OpLe: true, OpGt: true, OpGe: true,
}

var funcNames = map[string]bool{
	FuncStartsWith: true, FuncEndsWith: true, FuncContains: true,
}

// ParseFilter parses a $filter value. It returns a nil Expr and nil error
// for an empty or all-whitespace string, and a *SyntaxError for malformed
// input. It never panics.
func ParseFilter(s string) (Expr, error) {
	if err := checkInput(ParamFilter, s); err != nil {
		return nil, err
	}
	if strings.TrimLeft(s, " \t\r\n") == "" {
		return nil, nil
	}
	lx := &lexer{param: ParamFilter, src: s}
	if err := lx.tokenize(); err != nil {
		return nil, err
	}
	p := &parser{lx: lx}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tkEOF {
		return nil, p.errUnexpected(t, "'and', 'or' or end of input")
	}
	return e, nil
}

type parser struct {
	lx    *lexer
	i     int
	depth int
}

func (p *parser) peek() token { return p.lx.toks[p.i] }

func (p *parser) next() token {
	t := p.lx.toks[p.i]
	if t.kind != tkEOF {
		p.i++
	}
	return t
}

func (p *parser) isKeyword(t token, kw string) bool { return t.kind == tkIdent && t.text == kw }

// describe renders a token for error messages.
func describe(t token) string {
	switch t.kind {
	case tkEOF:
		return "end of input"
	case tkLit:
		return t.lit.Kind.String() + " " + truncate(t.text)
	}
	return "'" + truncate(t.text) + "'"
}

// errUnexpected reports that t was found where want was expected.
func (p *parser) errUnexpected(t token, want string) *SyntaxError {
	msg := fmt.Sprintf("expected %s but found %s", want, describe(t))
	if t.kind == tkIdent {
		if lower := strings.ToLower(t.text); lower != t.text &&
			(reservedWords[lower] || funcNames[lower] || lower == "asc" || lower == "desc") {
			msg += fmt.Sprintf(" (keywords are lowercase: use '%s')", lower)
		}
	}
	return p.lx.errAt(t.pos, "%s", msg)
}

func (p *parser) enter(t token) *SyntaxError {
	p.depth++
	if p.depth > MaxDepth {
		return p.lx.errAt(t.pos, "expression is nested too deeply (maximum depth %d)", MaxDepth)
	}
	return nil
}

func (p *parser) parseOr() (Expr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isKeyword(p.peek(), "or") {
		p.next()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &Or{L: l, R: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (Expr, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for p.isKeyword(p.peek(), "and") {
		p.next()
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		l = &And{L: l, R: r}
	}
	return l, nil
}

func (p *parser) parseUnary() (Expr, error) {
	t := p.peek()
	if !p.isKeyword(t, "not") {
		return p.parsePrimary()
	}
	p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	p.depth--
	return &Not{X: x}, nil
}

const wantExpr = "field name, function, 'not' or '('"

func (p *parser) parsePrimary() (Expr, error) {
	t := p.next()
	switch t.kind {
	case tkLParen:
		if err := p.enter(t); err != nil {
			return nil, err
		}
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tkRParen {
			return nil, p.errUnexpected(c, "'and', 'or' or ')'")
		}
		p.depth--
		return e, nil
	case tkIdent:
		if p.peek().kind == tkLParen {
			return p.parseCall(t)
		}
		if reservedWords[t.text] {
			return nil, p.errUnexpected(t, wantExpr)
		}
		return p.parseComparison(t)
	}
	return nil, p.errUnexpected(t, wantExpr)
}

// parseCall parses "fn(field, literal)"; fn has been consumed and the next
// token is "(".
func (p *parser) parseCall(fn token) (Expr, error) {
	if !funcNames[fn.text] {
		if reservedWords[fn.text] {
			return nil, p.errUnexpected(fn, wantExpr)
		}
		return nil, p.lx.errAt(fn.pos, "unsupported function '%s' (supported: contains, endswith, startswith)", truncate(fn.text))
	}
	p.next() // (
	field, err := p.parseField()
	if err != nil {
		return nil, err
	}
	if c := p.next(); c.kind != tkComma {
		return nil, p.errUnexpected(c, "','")
	}
	lit, err := p.parseLiteral()
	if err != nil {
		return nil, err
	}
	if c := p.next(); c.kind != tkRParen {
		return nil, p.errUnexpected(c, "')'")
	}
	return &Call{Func: fn.text, Field: field, Value: lit}, nil
}

func (p *parser) parseField() (string, error) {
	t := p.next()
	if t.kind != tkIdent || reservedWords[t.text] {
		return "", p.errUnexpected(t, "field name")
	}
	return t.text, nil
}

// parseComparison parses "field op literal" or "field in (...)"; field has
// been consumed.
func (p *parser) parseComparison(field token) (Expr, error) {
	op := p.next()
	if op.kind == tkIdent && compareOps[op.text] {
		lit, err := p.parseLiteral()
		if err != nil {
			return nil, err
		}
		return &Compare{Field: field.text, Op: op.text, Value: lit}, nil
	}
	if p.isKeyword(op, OpIn) {
		if c := p.next(); c.kind != tkLParen {
			return nil, p.errUnexpected(c, "'(' after 'in'")
		}
		var vals []Literal
		for {
			lit, err := p.parseLiteral()
			if err != nil {
				return nil, err
			}
			vals = append(vals, lit)
			c := p.next()
			if c.kind == tkRParen {
				break
			}
			if c.kind != tkComma {
				return nil, p.errUnexpected(c, "',' or ')'")
			}
		}
		return &In{Field: field.text, Values: vals}, nil
	}
	return nil, p.errUnexpected(op, fmt.Sprintf("operator (eq, ne, lt, le, gt, ge, in) after field '%s'", truncate(field.text)))
}

func (p *parser) parseLiteral() (Literal, error) {
	t := p.next()
	switch t.kind {
	case tkLit:
		return t.lit, nil
	case tkIdent:
		switch t.text {
		case "true":
			return Literal{Kind: LitBool, Bool: true, Raw: t.text}, nil
		case "false":
			return Literal{Kind: LitBool, Bool: false, Raw: t.text}, nil
		case "null":
			return Literal{Kind: LitNull, Raw: t.text}, nil
		}
		msg := "a literal value (string in single quotes, number, true, false, null or date-time)"
		return Literal{}, p.errUnexpected(t, msg)
	}
	return Literal{}, p.errUnexpected(t, "a literal value")
}
