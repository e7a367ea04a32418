package odata

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FieldType is the type of a Schema field; it decides which literals are
// accepted, how they are converted to bind arguments and which operators are
// allowed by default.
type FieldType int

// Field types. The zero FieldType is String.
const (
	// String accepts string literals; argument type string.
	// Default ops: eq ne in startswith endswith contains lt le gt ge.
	String FieldType = iota
	// Enum accepts string literals listed in Field.Enum; argument type
	// string. Default ops: eq ne in.
	Enum
	// Time accepts unquoted date-times or quoted strings in RFC 3339 format;
	// argument type time.Time in UTC. Default ops: eq ne lt le gt ge in.
	Time
	// Number accepts numbers; argument type float64.
	// Default ops: eq ne lt le gt ge in.
	Number
	// Int accepts integer numbers; argument type int64.
	// Default ops: eq ne lt le gt ge in.
	Int
	// Bool accepts true and false; argument type bool. Default ops: eq ne.
	Bool
	// StringArray is an array-of-strings column. "f eq 'x'" means the array
	// contains x and "f in ('x','y')" means it contains any of them. The
	// SQL is dialect specific, so Field.Custom is required; it receives
	// string values. Default ops: eq in.
	StringArray
	// Custom accepts any literal and requires Field.Custom, which receives
	// string, int64 (integers), float64 (other numbers), bool or time.Time
	// (UTC). Default ops: eq ne in.
	Custom
)

func (t FieldType) String() string {
	switch t {
	case String:
		return "string"
	case Enum:
		return "enum"
	case Time:
		return "date-time"
	case Number:
		return "number"
	case Int:
		return "integer"
	case Bool:
		return "boolean"
	case StringArray:
		return "string array"
	case Custom:
		return "custom"
	}
	return "FieldType(" + strconv.Itoa(int(t)) + ")"
}

var defaultOps = map[FieldType][]string{
	String:      {OpEq, OpNe, OpIn, FuncStartsWith, FuncEndsWith, FuncContains, OpLt, OpLe, OpGt, OpGe},
	Enum:        {OpEq, OpNe, OpIn},
	Time:        {OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpIn},
	Number:      {OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpIn},
	Int:         {OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpIn},
	Bool:        {OpEq, OpNe},
	StringArray: {OpEq, OpIn},
	Custom:      {OpEq, OpNe, OpIn},
}

// Field describes one public field of a resource for $filter and $orderby.
type Field struct {
	// Column is the SQL column expression. It is trusted text supplied by
	// the server, never by the client.
	Column string
	Type   FieldType
	// Enum lists the allowed values of an Enum field (case-sensitive).
	Enum []string
	// Filter allows the field in $filter.
	Filter bool
	// Sort allows the field in $orderby.
	Sort bool
	// Ops lists the allowed operators (eq ne lt le gt ge in startswith
	// endswith contains); empty means the defaults of Type.
	Ops []string
	// Custom, if set, compiles every predicate on this field itself (used
	// for GTS wildcard ids and dialect-specific array membership). op is the
	// operator (eq, ne, lt, le, gt, ge, in, startswith, endswith, contains),
	// already checked against Ops; vals are the literal values converted to
	// Go values as described for Type (one value, or one or more for in).
	// Custom never sees null: "f eq null" and "f ne null" compile to
	// "Column IS [NOT] NULL" (and are rejected if Column is empty). The
	// returned SQL is wrapped in parentheses; its "?" placeholders must
	// match args. A returned error is reported to the client as a
	// *FieldError wrapping it (return a *FieldError to control the message
	// completely).
	Custom func(op string, vals []any) (sql string, args []any, err error)
}

// Schema maps public field names (as used in $filter and $orderby) to their
// definitions.
type Schema map[string]Field

// allowed lists the filterable (sort=false) or sortable (sort=true) fields.
func (s Schema) allowed(sort bool) string {
	var names []string
	for name, f := range s {
		if (sort && f.Sort) || (!sort && f.Filter) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Compile translates e into a SQL boolean expression with "?" placeholders,
// suitable for a WHERE clause, and its bind arguments. It returns "", nil,
// nil for a nil e. Every emitted predicate and every AND/OR/NOT group is
// parenthesised, so the fragment can be combined with other conditions
// safely. Column text comes only from s; all values are bind arguments.
//
// Errors are *FieldError for problems with the client's query (unknown
// field, operator not allowed, wrong value type, enum value not allowed,
// null with an operator other than eq/ne) and *SchemaError for programming
// errors in s or in a hand-built e.
//
// Semantics follow SQL: "ne", "not" and comparisons are false/unknown for
// NULL columns (use "f eq null" explicitly). startswith, endswith and
// contains compile to "col LIKE ? ESCAPE '\'" with %, _ and \ escaped in the
// value; whether LIKE is case-sensitive depends on the database (SQLite: no
// for ASCII, PostgreSQL: yes). The ESCAPE clause suits SQLite and PostgreSQL
// (with standard_conforming_strings on); MySQL would need a doubled backslash.
func Compile(e Expr, s Schema) (where string, args []any, err error) {
	if isNilExpr(e) {
		return "", nil, nil
	}
	c := &compiler{schema: s}
	var b strings.Builder
	if err := c.expr(&b, e); err != nil {
		return "", nil, err
	}
	return b.String(), c.args, nil
}

type compiler struct {
	schema Schema
	args   []any
}

func (c *compiler) expr(b *strings.Builder, e Expr) error {
	if isNilExpr(e) {
		return &SchemaError{Msg: "nil sub-expression"}
	}
	switch x := e.(type) {
	case *And:
		return c.group(b, flatten(nil, x), " AND ")
	case *Or:
		return c.group(b, flatten(nil, x), " OR ")
	case *Not:
		b.WriteString("(NOT ")
		if err := c.expr(b, x.X); err != nil {
			return err
		}
		b.WriteByte(')')
		return nil
	case *Compare:
		return c.compare(b, x)
	case *In:
		return c.in(b, x)
	case *Call:
		return c.call(b, x)
	}
	return &SchemaError{Msg: fmt.Sprintf("unsupported expression type %T", e)}
}

// flatten collects the operands of a chain of the same associative operator
// (And or Or) so that "a and b and c" becomes one group.
func flatten(out []Expr, e Expr) []Expr {
	switch x := e.(type) {
	case *And:
		if x != nil {
			if l, ok := x.L.(*And); ok {
				out = flatten(out, l)
			} else {
				out = append(out, x.L)
			}
			if r, ok := x.R.(*And); ok {
				out = flatten(out, r)
			} else {
				out = append(out, x.R)
			}
			return out
		}
	case *Or:
		if x != nil {
			if l, ok := x.L.(*Or); ok {
				out = flatten(out, l)
			} else {
				out = append(out, x.L)
			}
			if r, ok := x.R.(*Or); ok {
				out = flatten(out, r)
			} else {
				out = append(out, x.R)
			}
			return out
		}
	}
	return append(out, e)
}

func (c *compiler) group(b *strings.Builder, parts []Expr, sep string) error {
	b.WriteByte('(')
	for i, p := range parts {
		if i > 0 {
			b.WriteString(sep)
		}
		if err := c.expr(b, p); err != nil {
			return err
		}
	}
	b.WriteByte(')')
	return nil
}

var sqlCompareOps = map[string]string{
	OpEq: "=", OpNe: "<>", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">=",
}

func (c *compiler) compare(b *strings.Builder, x *Compare) error {
	sqlOp, ok := sqlCompareOps[x.Op]
	if !ok {
		return &SchemaError{Field: x.Field, Msg: fmt.Sprintf("invalid comparison operator %q", x.Op)}
	}
	f, err := c.field(x.Field)
	if err != nil {
		return err
	}
	if err := checkOp(x.Field, f, x.Op); err != nil {
		return err
	}
	if x.Value.Kind == LitNull {
		if x.Op != OpEq && x.Op != OpNe {
			return fieldErr(x.Field, "null can only be used with eq or ne (field '%s' in %s)", x.Field, ParamFilter)
		}
		if f.Column == "" {
			return fieldErr(x.Field, "field '%s' in %s cannot be compared with null", x.Field, ParamFilter)
		}
		if x.Op == OpEq {
			fmt.Fprintf(b, "(%s IS NULL)", f.Column)
		} else {
			fmt.Fprintf(b, "(%s IS NOT NULL)", f.Column)
		}
		return nil
	}
	v, err := convert(x.Field, f, x.Value, x.Op)
	if err != nil {
		return err
	}
	if f.Custom != nil {
		return c.custom(b, x.Field, f, x.Op, []any{v})
	}
	fmt.Fprintf(b, "(%s %s ?)", f.Column, sqlOp)
	c.args = append(c.args, v)
	return nil
}

func (c *compiler) in(b *strings.Builder, x *In) error {
	f, err := c.field(x.Field)
	if err != nil {
		return err
	}
	if len(x.Values) == 0 {
		return &SchemaError{Field: x.Field, Msg: "empty 'in' list"}
	}
	if err := checkOp(x.Field, f, OpIn); err != nil {
		return err
	}
	vals := make([]any, len(x.Values))
	for i, l := range x.Values {
		if l.Kind == LitNull {
			return fieldErr(x.Field, "null is not allowed in an 'in' list (field '%s' in %s); use '%s eq null'", x.Field, ParamFilter, x.Field)
		}
		if vals[i], err = convert(x.Field, f, l, OpIn); err != nil {
			return err
		}
	}
	if f.Custom != nil {
		return c.custom(b, x.Field, f, OpIn, vals)
	}
	b.WriteByte('(')
	b.WriteString(f.Column)
	b.WriteString(" IN (")
	for i := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
	}
	b.WriteString("))")
	c.args = append(c.args, vals...)
	return nil
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func (c *compiler) call(b *strings.Builder, x *Call) error {
	if !funcNames[x.Func] {
		return &SchemaError{Field: x.Field, Msg: fmt.Sprintf("invalid function %q", x.Func)}
	}
	f, err := c.field(x.Field)
	if err != nil {
		return err
	}
	if err := checkOp(x.Field, f, x.Func); err != nil {
		return err
	}
	if f.Custom == nil && f.Type != String && f.Type != Enum {
		return &SchemaError{Field: x.Field, Msg: fmt.Sprintf("%s is allowed in Ops but %s fields only support it with Custom", x.Func, f.Type)}
	}
	if x.Value.Kind == LitNull {
		return fieldErr(x.Field, "%s(%s, ...) in %s requires a non-null value", x.Func, x.Field, ParamFilter)
	}
	v, err := convert(x.Field, f, x.Value, x.Func)
	if err != nil {
		return err
	}
	if f.Custom != nil {
		return c.custom(b, x.Field, f, x.Func, []any{v})
	}
	str, _ := v.(string) // String and Enum always convert to string
	pat := likeEscaper.Replace(str)
	switch x.Func {
	case FuncStartsWith:
		pat += "%"
	case FuncEndsWith:
		pat = "%" + pat
	case FuncContains:
		pat = "%" + pat + "%"
	}
	fmt.Fprintf(b, `(%s LIKE ? ESCAPE '\')`, f.Column)
	c.args = append(c.args, pat)
	return nil
}

func (c *compiler) custom(b *strings.Builder, name string, f Field, op string, vals []any) error {
	sql, args, err := f.Custom(op, vals)
	if err != nil {
		if fe, ok := errors.AsType[*FieldError](err); ok {
			return fe
		}
		return &FieldError{Param: ParamFilter, Field: name, Err: err,
			Msg: fmt.Sprintf("field '%s' in %s: %v", name, ParamFilter, err)}
	}
	if strings.TrimSpace(sql) == "" {
		return &SchemaError{Field: name, Msg: "Custom returned empty SQL"}
	}
	b.WriteByte('(')
	b.WriteString(sql)
	b.WriteByte(')')
	c.args = append(c.args, args...)
	return nil
}

// field looks up a filterable field and validates its definition.
func (c *compiler) field(name string) (Field, error) {
	f, ok := c.schema[name]
	if !ok || !f.Filter {
		return Field{}, &FieldError{Param: ParamFilter, Field: name,
			Msg: fmt.Sprintf("unknown field '%s' in %s (allowed: %s)", truncate(name), ParamFilter, c.schema.allowed(false))}
	}
	if err := validateField(name, f); err != nil {
		return Field{}, err
	}
	return f, nil
}

var knownOps = map[string]bool{
	OpEq: true, OpNe: true, OpLt: true, OpLe: true, OpGt: true, OpGe: true, OpIn: true,
	FuncStartsWith: true, FuncEndsWith: true, FuncContains: true,
}

func validateField(name string, f Field) error {
	if _, ok := defaultOps[f.Type]; !ok {
		return &SchemaError{Field: name, Msg: fmt.Sprintf("invalid type %s", f.Type)}
	}
	if (f.Type == StringArray || f.Type == Custom) && f.Custom == nil {
		return &SchemaError{Field: name, Msg: fmt.Sprintf("type %s requires Custom", f.Type)}
	}
	if f.Custom == nil && strings.TrimSpace(f.Column) == "" {
		return &SchemaError{Field: name, Msg: "Column is empty"}
	}
	if f.Type == Enum && len(f.Enum) == 0 {
		return &SchemaError{Field: name, Msg: "enum field has no Enum values"}
	}
	for _, op := range f.Ops {
		if !knownOps[op] {
			return &SchemaError{Field: name, Msg: fmt.Sprintf("unknown operator %q in Ops", op)}
		}
	}
	return nil
}

func checkOp(name string, f Field, op string) error {
	ops := f.Ops
	if len(ops) == 0 {
		ops = defaultOps[f.Type]
	}
	if slices.Contains(ops, op) {
		return nil
	}
	return fieldErr(name, "operator '%s' is not allowed for field '%s' in %s (allowed: %s)",
		op, name, ParamFilter, strings.Join(ops, ", "))
}

func fieldErr(name, format string, args ...any) *FieldError {
	return &FieldError{Param: ParamFilter, Field: name, Msg: fmt.Sprintf(format, args...)}
}

// convert turns a non-null literal into the Go value for f's type. isFunc
// ops (startswith...) skip the enum membership check.
func convert(name string, f Field, l Literal, op string) (any, error) {
	if l.Kind < LitString || l.Kind > LitTime {
		return nil, &SchemaError{Field: name, Msg: fmt.Sprintf("invalid literal kind %d", int(l.Kind))}
	}
	mismatch := func(want string) error {
		return fieldErr(name, "field '%s' in %s expects %s, got %s %s", name, ParamFilter, want, l.Kind, truncate(FormatLiteral(l)))
	}
	switch f.Type {
	case String, StringArray:
		if l.Kind != LitString {
			return nil, mismatch("a string in single quotes")
		}
		return l.Str, nil
	case Enum:
		if l.Kind != LitString {
			return nil, mismatch("a string in single quotes")
		}
		if !funcNames[op] && !slices.Contains(f.Enum, l.Str) {
			return nil, fieldErr(name, "value %s is not allowed for field '%s' in %s (allowed: %s)",
				truncate(FormatLiteral(l)), name, ParamFilter, strings.Join(f.Enum, ", "))
		}
		return l.Str, nil
	case Time:
		switch l.Kind {
		case LitTime:
			return l.Time.UTC(), nil
		case LitString:
			if t, ok := parseDateTime(l.Str); ok {
				return t.UTC(), nil
			}
		}
		return nil, mismatch("an RFC 3339 date-time such as 2026-01-01T00:00:00Z")
	case Number:
		if l.Kind != LitNumber {
			return nil, mismatch("a number")
		}
		return l.Num, nil
	case Int:
		if l.Kind != LitNumber || !l.IsInt {
			return nil, mismatch("an integer")
		}
		return l.Int, nil
	case Bool:
		if l.Kind != LitBool {
			return nil, mismatch("true or false")
		}
		return l.Bool, nil
	case Custom:
		switch l.Kind {
		case LitString:
			return l.Str, nil
		case LitNumber:
			if l.IsInt {
				return l.Int, nil
			}
			return l.Num, nil
		case LitBool:
			return l.Bool, nil
		case LitTime:
			return l.Time.UTC(), nil
		}
	}
	return nil, &SchemaError{Field: name, Msg: fmt.Sprintf("cannot convert %s literal", l.Kind)}
}

// truncate shortens user-supplied text quoted in error messages.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
