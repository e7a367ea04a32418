package odata

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Expr is a node of a parsed $filter expression: *And, *Or, *Not, *Compare,
// *In or *Call.
type Expr interface{ isExpr() }

// And is "L and R".
type And struct{ L, R Expr }

// Or is "L or R".
type Or struct{ L, R Expr }

// Not is "not X".
type Not struct{ X Expr }

// Compare is "Field Op Value", where Op is one of eq, ne, lt, le, gt, ge.
type Compare struct {
	Field string
	Op    string
	Value Literal
}

// In is "Field in (Values...)"; Values is never empty when produced by
// ParseFilter.
type In struct {
	Field  string
	Values []Literal
}

// Call is "Func(Field, Value)", where Func is startswith, endswith or
// contains.
type Call struct {
	Func  string
	Field string
	Value Literal
}

func (*And) isExpr()     {}
func (*Or) isExpr()      {}
func (*Not) isExpr()     {}
func (*Compare) isExpr() {}
func (*In) isExpr()      {}
func (*Call) isExpr()    {}

// Comparison operators accepted by Compare.Op.
const (
	OpEq = "eq"
	OpNe = "ne"
	OpLt = "lt"
	OpLe = "le"
	OpGt = "gt"
	OpGe = "ge"
	// OpIn is the operator name used for In in Field.Ops and Field.Custom.
	OpIn = "in"
)

// Function names accepted by Call.Func (and usable in Field.Ops).
const (
	FuncStartsWith = "startswith"
	FuncEndsWith   = "endswith"
	FuncContains   = "contains"
)

// LitKind is the kind of a Literal.
type LitKind int

// Literal kinds. The zero LitKind is invalid.
const (
	LitString LitKind = iota + 1 // 'text'; value in Str
	LitNumber                    // 12, -3.5; value in Num (and Int if IsInt)
	LitBool                      // true / false; value in Bool
	LitNull                      // null
	LitTime                      // unquoted RFC 3339 date-time; value in Time
)

func (k LitKind) String() string {
	switch k {
	case LitString:
		return "string"
	case LitNumber:
		return "number"
	case LitBool:
		return "boolean"
	case LitNull:
		return "null"
	case LitTime:
		return "date-time"
	}
	return "LitKind(" + strconv.Itoa(int(k)) + ")"
}

// Literal is a constant in a $filter expression.
type Literal struct {
	Kind LitKind
	// Str is the unescaped value of a LitString.
	Str string
	// Num is the value of a LitNumber (also set, possibly rounded, when IsInt).
	Num float64
	// IsInt reports that a LitNumber was written without a fractional part
	// and fits in an int64; its exact value is then in Int.
	IsInt bool
	Int   int64
	// Bool is the value of a LitBool.
	Bool bool
	// Time is the value of a LitTime, with the offset as written.
	Time time.Time
	// Raw is the literal's source text as written (including quotes for
	// strings). It is informational only: Format ignores it.
	Raw string
}

// Format renders e as $filter text that ParseFilter parses back into an
// equal expression (up to Literal.Raw), using the minimum parentheses
// needed. Format(nil) is "". For expressions ParseFilter cannot produce
// (nil children, invalid field names or operators, empty In lists,
// non-finite numbers, years outside 0000-9999) the text is not guaranteed to
// be parseable, but Format never panics.
func Format(e Expr) string {
	if isNilExpr(e) {
		return ""
	}
	var b strings.Builder
	formatExpr(&b, e, precOr)
	return b.String()
}

const (
	precOr = iota + 1
	precAnd
	precNot
	precPrimary
)

func precOf(e Expr) int {
	switch e.(type) {
	case *Or:
		return precOr
	case *And:
		return precAnd
	case *Not:
		return precNot
	}
	return precPrimary
}

// formatExpr writes e, parenthesised if its precedence is below min.
func formatExpr(b *strings.Builder, e Expr, min int) {
	if isNilExpr(e) {
		b.WriteString("<nil>")
		return
	}
	if precOf(e) < min {
		b.WriteByte('(')
		formatExpr(b, e, precOr)
		b.WriteByte(')')
		return
	}
	switch x := e.(type) {
	case *Or:
		formatExpr(b, x.L, precOr)
		b.WriteString(" or ")
		formatExpr(b, x.R, precAnd) // left-associative: right Or needs parens
	case *And:
		formatExpr(b, x.L, precAnd)
		b.WriteString(" and ")
		formatExpr(b, x.R, precNot)
	case *Not:
		b.WriteString("not ")
		formatExpr(b, x.X, precNot)
	case *Compare:
		b.WriteString(x.Field)
		b.WriteByte(' ')
		b.WriteString(x.Op)
		b.WriteByte(' ')
		b.WriteString(FormatLiteral(x.Value))
	case *In:
		b.WriteString(x.Field)
		b.WriteString(" in (")
		for i, v := range x.Values {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(FormatLiteral(v))
		}
		b.WriteByte(')')
	case *Call:
		b.WriteString(x.Func)
		b.WriteByte('(')
		b.WriteString(x.Field)
		b.WriteString(", ")
		b.WriteString(FormatLiteral(x.Value))
		b.WriteByte(')')
	default:
		b.WriteString("<unknown>")
	}
}

// FormatLiteral renders l in canonical $filter syntax: strings in single
// quotes with embedded quotes doubled, integers in decimal, other numbers
// with a fractional part and no exponent, date-times in RFC 3339 with the
// minimal fractional seconds and the literal's own UTC offset.
func FormatLiteral(l Literal) string {
	switch l.Kind {
	case LitString:
		return "'" + strings.ReplaceAll(l.Str, "'", "''") + "'"
	case LitNumber:
		if l.IsInt {
			return strconv.FormatInt(l.Int, 10)
		}
		if math.IsNaN(l.Num) || math.IsInf(l.Num, 0) {
			return strconv.FormatFloat(l.Num, 'g', -1, 64)
		}
		s := strconv.FormatFloat(l.Num, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0" // keep it a decimal so it does not re-parse as an integer
		}
		return s
	case LitBool:
		if l.Bool {
			return "true"
		}
		return "false"
	case LitNull:
		return "null"
	case LitTime:
		return l.Time.Format(time.RFC3339Nano)
	}
	return "<invalid>"
}

// isNilExpr reports whether e is nil or a typed nil pointer.
func isNilExpr(e Expr) bool {
	switch x := e.(type) {
	case nil:
		return true
	case *And:
		return x == nil
	case *Or:
		return x == nil
	case *Not:
		return x == nil
	case *Compare:
		return x == nil
	case *In:
		return x == nil
	case *Call:
		return x == nil
	}
	return false
}
