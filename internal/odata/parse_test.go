package odata

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseFilter(t *testing.T) {
	a1 := cmp("a", "eq", lint(1))
	b2 := cmp("b", "eq", lint(2))
	c3 := cmp("c", "eq", lint(3))
	plus2 := time.FixedZone("", 2*3600)
	minus530 := time.FixedZone("", -(5*3600 + 30*60))

	tests := []struct {
		name string
		in   string
		want Expr
	}{
		{"empty", "", nil},
		{"blank", " \t\r\n ", nil},

		// Operators.
		{"eq", "a eq 1", a1},
		{"ne", "a ne 1", cmp("a", "ne", lint(1))},
		{"lt", "a lt 1", cmp("a", "lt", lint(1))},
		{"le", "a le 1", cmp("a", "le", lint(1))},
		{"gt", "a gt 1", cmp("a", "gt", lint(1))},
		{"ge", "a ge 1", cmp("a", "ge", lint(1))},
		{"in one", "status in ('active')", in("status", lstr("active"))},
		{"in many", "status in ('active','draft', 'x')", in("status", lstr("active"), lstr("draft"), lstr("x"))},
		{"in mixed kinds", "v in (1, 2.5, true, null, 'x')", in("v", lint(1), ldec(2.5), lbool(true), lnull(), lstr("x"))},
		{"startswith", "startswith(name,'x')", call("startswith", "name", lstr("x"))},
		{"endswith", "endswith( name , 'x' )", call("endswith", "name", lstr("x"))},
		{"contains", "contains(name, 'a%_\\')", call("contains", "name", lstr(`a%_\`))},

		// Precedence and associativity.
		{"and binds tighter than or (right)", "a eq 1 or b eq 2 and c eq 3", or(a1, and(b2, c3))},
		{"and binds tighter than or (left)", "a eq 1 and b eq 2 or c eq 3", or(and(a1, b2), c3)},
		{"not binds tighter than and", "not a eq 1 and b eq 2", and(not(a1), b2)},
		{"not binds tighter than or", "not a eq 1 or b eq 2", or(not(a1), b2)},
		{"not over group", "not (a eq 1 or b eq 2)", not(or(a1, b2))},
		{"not not", "not not a eq 1", not(not(a1))},
		{"not call", "not contains(a,'x')", not(call("contains", "a", lstr("x")))},
		{"and left assoc", "a eq 1 and b eq 2 and c eq 3", and(and(a1, b2), c3)},
		{"or left assoc", "a eq 1 or b eq 2 or c eq 3", or(or(a1, b2), c3)},
		{"parens right", "a eq 1 and (b eq 2 and c eq 3)", and(a1, and(b2, c3))},
		{"parens override", "(a eq 1 or b eq 2) and c eq 3", and(or(a1, b2), c3)},
		{"redundant parens", "((a eq 1))", a1},
		{"no spaces around parens", "(a eq 1)and(b eq 2)or(c eq 3)", or(and(a1, b2), c3)},
		{"other whitespace", "a\teq\n1\r\nand  b eq 2", and(a1, b2)},

		// Strings.
		{"empty string", "a eq ''", cmp("a", "eq", lstr(""))},
		{"escaped quote", "a eq 'it''s'", cmp("a", "eq", lstr("it's"))},
		{"only quote", "a eq ''''", cmp("a", "eq", lstr("'"))},
		{"two quotes", "a eq ''''''", cmp("a", "eq", lstr("''"))},
		{"keywords in string", "a eq ' and b eq 1 or '", cmp("a", "eq", lstr(" and b eq 1 or "))},
		{"unicode", "a eq 'héllo 世界 🎉'", cmp("a", "eq", lstr("héllo 世界 🎉"))},
		{"sql in string", "a eq '1''); DROP TABLE x; --'", cmp("a", "eq", lstr("1'); DROP TABLE x; --"))},

		// Numbers.
		{"zero", "a eq 0", cmp("a", "eq", lint(0))},
		{"negative int", "a eq -5", cmp("a", "eq", lint(-5))},
		{"leading zeros", "a eq 007", cmp("a", "eq", lint(7))},
		{"decimal", "a eq 12.50", cmp("a", "eq", ldec(12.5))},
		{"negative decimal", "a eq -0.25", cmp("a", "eq", ldec(-0.25))},
		{"integral decimal stays decimal", "a eq 3.0", cmp("a", "eq", ldec(3))},
		{"max int64", "a eq 9223372036854775807", cmp("a", "eq", lint(9223372036854775807))},
		{"min int64", "a eq -9223372036854775808", cmp("a", "eq", lint(-9223372036854775808))},
		{"int64 overflow becomes decimal", "a eq 9223372036854775808", cmp("a", "eq", ldec(9223372036854775808))},
		{"number before paren", "a in (1)", in("a", lint(1))},

		// Other literals.
		{"true", "a eq true", cmp("a", "eq", lbool(true))},
		{"false", "a ne false", cmp("a", "ne", lbool(false))},
		{"null", "a eq null", cmp("a", "eq", lnull())},
		{"time Z", "t gt 2026-01-01T00:00:00Z", cmp("t", "gt", ltime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))},
		{"time millis", "t gt 2026-01-01T00:00:00.000Z", cmp("t", "gt", ltime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))},
		{"time nanos", "t gt 2026-01-01T10:20:30.123456789Z", cmp("t", "gt", ltime(time.Date(2026, 1, 1, 10, 20, 30, 123456789, time.UTC)))},
		{"time offset", "t lt 2026-01-01T00:00:00+02:00", cmp("t", "lt", ltime(time.Date(2026, 1, 1, 0, 0, 0, 0, plus2)))},
		{"time negative offset", "t lt 2026-06-30T23:59:59.5-05:30", cmp("t", "lt", ltime(time.Date(2026, 6, 30, 23, 59, 59, 5e8, minus530)))},
		{"time in list", "t in (2026-01-01T00:00:00Z)", in("t", ltime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))},

		// Field names.
		{"underscore field", "_x_1 eq 1", cmp("_x_1", "eq", lint(1))},
		{"function name as field", "contains eq 'x'", cmp("contains", "eq", lstr("x"))},
		{"asc as field", "asc eq 1", cmp("asc", "eq", lint(1))},
		{"field starting with keyword", "order eq 1 and android eq 2 or notes eq 3",
			or(and(cmp("order", "eq", lint(1)), cmp("android", "eq", lint(2))), cmp("notes", "eq", lint(3)))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFilter(tc.in)
			if err != nil {
				t.Fatalf("ParseFilter(%q): unexpected error: %v", tc.in, err)
			}
			if !exprEqual(got, tc.want, false) {
				t.Fatalf("ParseFilter(%q)\n got: %s\nwant: %s", tc.in, dump(got), dump(tc.want))
			}
		})
	}
}

func TestParseFilterRaw(t *testing.T) {
	e, err := ParseFilter("a in ('it''s', -1.50, 2026-01-01T00:00:00.000Z, true, null, 9223372036854775808)")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"'it''s'", "-1.50", "2026-01-01T00:00:00.000Z", "true", "null", "9223372036854775808"}
	vals := e.(*In).Values
	if len(vals) != len(want) {
		t.Fatalf("got %d values", len(vals))
	}
	for i, v := range vals {
		if v.Raw != want[i] {
			t.Errorf("value %d: Raw = %q, want %q", i, v.Raw, want[i])
		}
	}
	if v := vals[1]; v.Kind != LitNumber || v.IsInt || v.Num != -1.5 {
		t.Errorf("decimal literal = %+v", v)
	}
	if v := vals[5]; v.Kind != LitNumber || v.IsInt || v.Num != 9223372036854775808 {
		t.Errorf("overflowing integer literal = %+v", v)
	}
}

func TestParseFilterErrors(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("(", n) + "a eq 1" + strings.Repeat(")", n) }
	nots := func(n int) string { return strings.Repeat("not ", n) + "a eq 1" }

	tests := []struct {
		in  string
		pos int
		msg string // substring of SyntaxError.Msg
	}{
		// Structure.
		{"a", 2, "expected operator (eq, ne, lt, le, gt, ge, in) after field 'a' but found end of input"},
		{"a eq", 5, "expected a literal value but found end of input"},
		{"a eq b", 6, "but found 'b'"},
		{"a eq 1 b eq 2", 8, "expected 'and', 'or' or end of input but found 'b'"},
		{"a eq 1 and", 11, "expected field name, function, 'not' or '(' but found end of input"},
		{"a eq 1 or or b eq 1", 11, "but found 'or'"},
		{"not", 4, "but found end of input"},
		{"(a eq 1", 8, "expected 'and', 'or' or ')' but found end of input"},
		{"a eq 1)", 7, "expected 'and', 'or' or end of input but found ')'"},
		{"()", 2, "but found ')'"},
		{"'x' eq a", 1, "expected field name, function, 'not' or '(' but found string 'x'"},
		{"1 eq a", 1, "but found number 1"},
		{"and eq 1", 1, "but found 'and'"},
		{"null eq 1", 1, "but found 'null'"},
		{"a eq 1, b eq 2", 7, "but found ','"},
		{"a eq eq", 6, "but found 'eq'"},
		{"a eq (1)", 6, "but found '('"},

		// Keyword case.
		{"a EQ 1", 3, "(keywords are lowercase: use 'eq')"},
		{"a eq 1 AND b eq 2", 8, "(keywords are lowercase: use 'and')"},
		{"a eq TRUE", 6, "(keywords are lowercase: use 'true')"},

		// in lists.
		{"a in 1", 6, "expected '(' after 'in' but found number 1"},
		{"a in ()", 7, "but found ')'"},
		{"a in (1,)", 9, "but found ')'"},
		{"a in (1 2)", 9, "expected ',' or ')' but found number 2"},
		{"a in (1", 8, "expected ',' or ')' but found end of input"},

		// Functions.
		{"tolower(a) eq 'x'", 1, "unsupported function 'tolower' (supported: contains, endswith, startswith)"},
		{"contains(a 'x')", 12, "expected ',' but found string 'x'"},
		{"contains(a, b)", 13, "but found 'b'"},
		{"contains('x', a)", 10, "expected field name but found string 'x'"},
		{"contains(null, 'x')", 10, "expected field name but found 'null'"},
		{"contains(a, 'x'", 16, "expected ')' but found end of input"},
		{"contains(a, 'x', 'y')", 16, "expected ')' but found ','"},
		{"contains", 9, "expected operator"},
		{"not(a eq 1)", 1, ""}, // valid, checked below
		{"and(a, 'x')", 1, "but found 'and'"},

		// Lexical.
		{"a eq 'x", 6, "unterminated string literal"},
		{"a eq 'it''s", 6, "unterminated string literal"},
		{`a eq "x"`, 6, `unexpected character '"' (string literals use single quotes)`},
		{"a/b eq 1", 2, "unexpected character '/' (field paths are not supported)"},
		{"a eq 1 #", 8, "unexpected character '#'"},
		{"é eq 1", 1, "unexpected character 'é'"},
		{"a eq -x", 6, "unexpected character '-'"},
		{"a eq 1.2.3", 6, "invalid number '1.2.3'"},
		{"a eq 1.", 6, "invalid number '1.'"},
		{"a eq .5", 6, "unexpected character '.'"},
		{"a eq 12x", 6, "invalid number '12x'"},
		{"a eq 1e5", 6, "invalid number '1e5'"},
		{"a eq 1" + strings.Repeat("0", 400) + ".5", 6, "is out of range"},
		{"a eq 'x\xff'", 8, "invalid UTF-8 encoding"},
		{"a eq 'x\x00'", 8, "NUL character is not allowed"},

		// Date-times.
		{"t eq 2026-01-01", 6, "invalid date-time '2026-01-01' (expected RFC 3339, e.g. 2026-01-01T00:00:00Z)"},
		{"t eq 2026-13-01T00:00:00Z", 6, "invalid date-time"},
		{"t eq 2026-02-30T00:00:00Z", 6, "invalid date-time"},
		{"t eq 2026-01-01T24:00:00Z", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00:60Z", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00:00", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00Z", 6, "invalid date-time"},
		{"t eq 2026-01-01t00:00:00z", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00:00+24:00", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00:00+0200", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00:00.Z", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00:00.1234567890Z", 6, "invalid date-time"},
		{"t eq 2026-01-01T00:00:00Zabc", 6, "invalid date-time"},
		{"t eq 2026-01-01 00:00:00Z", 6, "invalid date-time"},

		// Limits.
		{strings.Repeat(" ", MaxInputLen+1), MaxInputLen + 1, "input too long: 4097 bytes (maximum 4096)"},
		{nest(MaxDepth + 1), MaxDepth + 1, "expression is nested too deeply (maximum depth 32)"},
		{nots(MaxDepth + 1), 4*MaxDepth + 1, "expression is nested too deeply"},
		{"not " + nest(MaxDepth), MaxDepth + 4, "expression is nested too deeply"},
	}
	for _, tc := range tests {
		name := tc.in
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			e, err := ParseFilter(tc.in)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseFilter(%q) = %s, want error", tc.in, dump(e))
			}
			if e != nil {
				t.Errorf("non-nil Expr returned with error")
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v is not a *SyntaxError", err, err)
			}
			if se.Pos != tc.pos || !strings.Contains(se.Msg, tc.msg) {
				t.Fatalf("ParseFilter(%q) error = pos %d %q\nwant pos %d containing %q", tc.in, se.Pos, se.Msg, tc.pos, tc.msg)
			}
			if se.Param != ParamFilter {
				t.Errorf("Param = %q", se.Param)
			}
		})
	}
}

func TestParseFilterLimitsAccepted(t *testing.T) {
	okInputs := []string{
		strings.Repeat("(", MaxDepth) + "a eq 1" + strings.Repeat(")", MaxDepth),
		strings.Repeat("not ", MaxDepth) + "a eq 1",
		strings.Repeat("not (", MaxDepth/2) + "a eq 1" + strings.Repeat(")", MaxDepth/2),
		// Depth is about nesting, not length: a long flat chain is fine.
		strings.TrimSuffix(strings.Repeat("(a eq 1) and ", 200), " and "),
		"a eq '" + strings.Repeat("x", MaxInputLen-7) + "'",
	}
	for _, in := range okInputs {
		if _, err := ParseFilter(in); err != nil {
			t.Errorf("ParseFilter(%.40q...): %v", in, err)
		}
	}
	if n := len(okInputs[4]); n != MaxInputLen {
		t.Fatalf("test input has %d bytes", n)
	}
	// Sibling groups do not accumulate depth.
	sib := strings.Repeat("(", MaxDepth) + "a eq 1" + strings.Repeat(")", MaxDepth)
	if _, err := ParseFilter(sib + " and " + sib); err != nil {
		t.Errorf("sibling groups: %v", err)
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := ParseFilter("a eq 'x")
	if got, want := err.Error(), "$filter: syntax error at position 6: unterminated string literal"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	_, err = ParseOrderBy("a,,b")
	if got, want := err.Error(), "$orderby: syntax error at position 3: expected field name but found ','"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&SyntaxError{Pos: 1, Msg: "m"}).Error(), "$filter: syntax error at position 1: m"; got != want {
		t.Errorf("zero Param: %q", got)
	}
}
