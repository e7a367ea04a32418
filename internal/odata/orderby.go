package odata

import (
	"fmt"
	"strings"
)

// OrderItem is one "field [asc|desc]" element of $orderby.
type OrderItem struct {
	Field string
	Desc  bool
}

// ParseOrderBy parses a $orderby value: "field [asc|desc] (, field [asc|desc])*".
// It returns nil, nil for an empty or all-whitespace string and a
// *SyntaxError for malformed input, including a field listed twice. It never
// panics.
func ParseOrderBy(s string) ([]OrderItem, error) {
	if err := checkInput(ParamOrderBy, s); err != nil {
		return nil, err
	}
	if strings.TrimLeft(s, " \t\r\n") == "" {
		return nil, nil
	}
	lx := &lexer{param: ParamOrderBy, src: s}
	if err := lx.tokenize(); err != nil {
		return nil, err
	}
	p := &parser{lx: lx}
	var items []OrderItem
	seen := map[string]bool{}
	for {
		t := p.next()
		if t.kind != tkIdent {
			return nil, p.errUnexpected(t, "field name")
		}
		if seen[t.text] {
			return nil, lx.errAt(t.pos, "duplicate field '%s'", truncate(t.text))
		}
		seen[t.text] = true
		item := OrderItem{Field: t.text}
		t = p.next()
		hasDir := false
		if t.kind == tkIdent && (t.text == "asc" || t.text == "desc") {
			item.Desc = t.text == "desc"
			hasDir = true
			t = p.next()
		}
		items = append(items, item)
		switch t.kind {
		case tkEOF:
			return items, nil
		case tkComma:
			continue
		}
		want := "',' or end of input"
		if !hasDir {
			want = "'asc', 'desc', " + want
		}
		return nil, p.errUnexpected(t, want)
	}
}

// FormatOrderBy renders items as $orderby text that ParseOrderBy parses
// back into the same items ("a,b desc"; asc is implied).
func FormatOrderBy(items []OrderItem) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(it.Field)
		if it.Desc {
			b.WriteString(" desc")
		}
	}
	return b.String()
}

// CheckOrderBy verifies that every item names a field of s with Sort set. It
// returns a *FieldError otherwise.
func CheckOrderBy(items []OrderItem, s Schema) error {
	for _, it := range items {
		f, ok := s[it.Field]
		if !ok || !f.Sort {
			return &FieldError{Param: ParamOrderBy, Field: it.Field,
				Msg: fmt.Sprintf("unknown field '%s' in %s (allowed: %s)", truncate(it.Field), ParamOrderBy, s.allowed(true))}
		}
	}
	return nil
}

// CompileOrderBy checks items with CheckOrderBy and renders them as the body
// of a SQL ORDER BY clause, e.g. "created_at DESC, id ASC". It returns ""
// for no items. Column text comes only from the Schema.
func CompileOrderBy(items []OrderItem, s Schema) (string, error) {
	if err := CheckOrderBy(items, s); err != nil {
		return "", err
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		f := s[it.Field]
		if f.Column == "" {
			return "", &SchemaError{Field: it.Field, Msg: "sortable field has no Column"}
		}
		dir := " ASC"
		if it.Desc {
			dir = " DESC"
		}
		parts = append(parts, f.Column+dir)
	}
	return strings.Join(parts, ", "), nil
}
