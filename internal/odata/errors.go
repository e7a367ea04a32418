package odata

import (
	"fmt"
)

// Names of the query parameters, used in error messages.
const (
	ParamFilter  = "$filter"
	ParamOrderBy = "$orderby"
)

// SyntaxError reports malformed $filter or $orderby text. It is always the
// client's fault (HTTP 400).
type SyntaxError struct {
	// Param is the query parameter the error refers to: ParamFilter or
	// ParamOrderBy. Empty means ParamFilter.
	Param string
	// Pos is the 1-based byte offset in the input of the offending token or
	// character. When the input ended unexpectedly it is len(input)+1; for an
	// over-long input it is MaxInputLen+1.
	Pos int
	// Msg describes the problem.
	Msg string
}

// Error returns e.g. "$filter: syntax error at position 7: unterminated string literal".
func (e *SyntaxError) Error() string {
	p := e.Param
	if p == "" {
		p = ParamFilter
	}
	return fmt.Sprintf("%s: syntax error at position %d: %s", p, e.Pos, e.Msg)
}

// FieldError reports a well-formed query that is not acceptable for the
// Schema: an unknown or non-filterable/non-sortable field, a value of the
// wrong type, an enum value that is not allowed, an operator that is not
// allowed for the field, or an error returned by a Field.Custom compiler. It
// is the client's fault (HTTP 400).
type FieldError struct {
	// Param is ParamFilter or ParamOrderBy.
	Param string
	// Field is the field name as written by the client.
	Field string
	// Msg is the complete, human-readable message; Error returns it
	// unchanged, e.g. "unknown field 'x' in $filter (allowed: a, b, c)".
	Msg string
	// Err is the underlying error returned by Field.Custom, if any.
	Err error
}

func (e *FieldError) Error() string { return e.Msg }

// Unwrap returns the error returned by Field.Custom, if any.
func (e *FieldError) Unwrap() error { return e.Err }

// SchemaError reports a programming error in a Schema or a hand-built AST
// (for example a StringArray field without Custom, an unknown operator in
// Field.Ops, or a nil sub-expression). It is the server's fault (HTTP 500),
// never the client's.
type SchemaError struct {
	Field string // may be empty
	Msg   string
}

func (e *SchemaError) Error() string {
	if e.Field == "" {
		return "odata: " + e.Msg
	}
	return fmt.Sprintf("odata: field '%s': %s", e.Field, e.Msg)
}
