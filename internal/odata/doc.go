// Package odata parses and compiles OData-style list query parameters
// ($filter and $orderby) for the REST API.
//
// The package is pure: it performs no I/O. ParseFilter and ParseOrderBy turn
// user input into a small AST; Compile turns a filter AST into a SQL WHERE
// fragment with "?" placeholders, validated against a Schema that maps the
// public field names to SQL column expressions. Column text only ever comes
// from the Schema; every user-supplied value is returned as a bind argument.
//
// # $filter grammar
//
//	filter     = or
//	or         = and { "or" and }
//	and        = unary { "and" unary }
//	unary      = "not" unary | primary
//	primary    = "(" or ")"
//	           | field ( "eq" | "ne" | "lt" | "le" | "gt" | "ge" ) literal
//	           | field "in" "(" literal { "," literal } ")"
//	           | ( "startswith" | "endswith" | "contains" ) "(" field "," literal ")"
//	field      = [A-Za-z_][A-Za-z0-9_]*   (not a reserved word)
//	literal    = string | number | "true" | "false" | "null" | datetime
//	string     = "'" { any character except "'" | "''" } "'"
//	number     = [ "-" ] digit { digit } [ "." digit { digit } ]
//	datetime   = RFC 3339 date-time, unquoted, e.g. 2026-01-01T00:00:00.000Z
//	             or 2026-01-01T00:00:00+02:00
//
// Keywords are case-sensitive and lowercase, as in OData. Binary operators
// are left-associative; precedence is not > and > or. Whitespace (space, tab,
// CR, LF) may separate tokens. The reserved words and, or, not, eq, ne, lt,
// le, gt, ge, in, true, false and null cannot be used as field names.
//
// Inputs longer than MaxInputLen bytes, nested deeper than MaxDepth
// (parenthesised groups and "not" operators), containing invalid UTF-8 or NUL
// bytes are rejected with a *SyntaxError.
//
// # $orderby grammar
//
//	orderby = item { "," item }
//	item    = field [ "asc" | "desc" ]
package odata
