package odata

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

var errBadPattern = errors.New("invalid id pattern")

// testSchema exercises every field type. The Custom compilers imitate the
// real ones: SQLite JSON array membership and GTS wildcard ids.
func testSchema() Schema {
	return Schema{
		"name":       {Column: "e.name", Type: String, Filter: true, Sort: true},
		"owner":      {Column: "e.owner", Filter: true},
		"status":     {Column: "e.status", Type: Enum, Enum: []string{"active", "draft", "archived"}, Filter: true},
		"created_at": {Column: "e.created_at", Type: Time, Filter: true, Sort: true},
		"score":      {Column: "e.score", Type: Number, Filter: true},
		"version":    {Column: "e.version", Type: Int, Filter: true},
		"enabled":    {Column: "e.enabled", Type: Bool, Filter: true},
		"hidden":     {Column: "e.hidden", Sort: true},
		"tags": {Type: StringArray, Filter: true, Custom: func(op string, vals []any) (string, []any, error) {
			marks := strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")
			return "EXISTS (SELECT 1 FROM json_each(e.tags) WHERE json_each.value IN (" + marks + "))", vals, nil
		}},
		"id": {Column: "e.id", Filter: true, Ops: []string{OpEq, OpIn}, Custom: func(op string, vals []any) (string, []any, error) {
			var parts []string
			var args []any
			for _, v := range vals {
				s := v.(string)
				if strings.Contains(s, "**") {
					return "", nil, errBadPattern
				}
				if strings.HasSuffix(s, "*") {
					parts = append(parts, "e.id LIKE ? ESCAPE '\\'")
					args = append(args, likeEscaper.Replace(strings.TrimSuffix(s, "*"))+"%")
				} else {
					parts = append(parts, "e.id = ?")
					args = append(args, s)
				}
			}
			return strings.Join(parts, " OR "), args, nil
		}},
		"any": {Type: Custom, Filter: true, Ops: []string{OpEq, OpNe, OpIn, OpLt}, Custom: func(op string, vals []any) (string, []any, error) {
			return "x_" + op + "(?)", []any{fmt.Sprintf("%T", vals[0])}, nil
		}},
	}
}

func TestCompile(t *testing.T) {
	jan1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		sql  string
		args []any
	}{
		{"", "", nil},
		{"name eq 'x'", "(e.name = ?)", []any{"x"}},
		{"name ne 'x'", "(e.name <> ?)", []any{"x"}},
		{"name lt 'x'", "(e.name < ?)", []any{"x"}},
		{"name le 'x'", "(e.name <= ?)", []any{"x"}},
		{"name gt 'x'", "(e.name > ?)", []any{"x"}},
		{"name ge 'x'", "(e.name >= ?)", []any{"x"}},
		{"name in ('a','b','c')", "(e.name IN (?, ?, ?))", []any{"a", "b", "c"}},
		{"startswith(name, 'a%_\\b')", `(e.name LIKE ? ESCAPE '\')`, []any{`a\%\_\\b%`}},
		{"endswith(name, 'x')", `(e.name LIKE ? ESCAPE '\')`, []any{"%x"}},
		{"contains(name, 'it''s')", `(e.name LIKE ? ESCAPE '\')`, []any{"%it's%"}},
		{"contains(name, '')", `(e.name LIKE ? ESCAPE '\')`, []any{"%%"}},
		{"owner eq null", "(e.owner IS NULL)", nil},
		{"owner ne null", "(e.owner IS NOT NULL)", nil},
		{"status eq 'active'", "(e.status = ?)", []any{"active"}},
		{"status in ('active', 'draft')", "(e.status IN (?, ?))", []any{"active", "draft"}},
		{"status ne null", "(e.status IS NOT NULL)", nil},
		{"created_at gt 2026-01-01T02:00:00+02:00", "(e.created_at > ?)", []any{jan1}},
		{"created_at le 2026-01-01T00:00:00.000Z", "(e.created_at <= ?)", []any{jan1}},
		{"created_at lt '2026-01-01T05:30:00+05:30'", "(e.created_at < ?)", []any{jan1}},
		{"created_at in (2026-01-01T00:00:00Z, '2026-01-01T00:00:00Z')", "(e.created_at IN (?, ?))", []any{jan1, jan1}},
		{"score ge 1", "(e.score >= ?)", []any{1.0}},
		{"score lt -2.5", "(e.score < ?)", []any{-2.5}},
		{"version eq 3", "(e.version = ?)", []any{int64(3)}},
		{"version in (1, -2)", "(e.version IN (?, ?))", []any{int64(1), int64(-2)}},
		{"enabled eq true", "(e.enabled = ?)", []any{true}},
		{"enabled ne false", "(e.enabled <> ?)", []any{false}},
		{"tags eq 'x'", "(EXISTS (SELECT 1 FROM json_each(e.tags) WHERE json_each.value IN (?)))", []any{"x"}},
		{"tags in ('x', 'y')", "(EXISTS (SELECT 1 FROM json_each(e.tags) WHERE json_each.value IN (?, ?)))", []any{"x", "y"}},
		{"id eq 'gts.a.b.*'", `(e.id LIKE ? ESCAPE '\')`, []any{`gts.a.b.%`}},
		{"id in ('a', 'b_*')", `(e.id = ? OR e.id LIKE ? ESCAPE '\')`, []any{"a", `b\_%`}},
		{"any eq 'x'", "(x_eq(?))", []any{"string"}},
		{"any eq 1", "(x_eq(?))", []any{"int64"}},
		{"any eq 1.5", "(x_eq(?))", []any{"float64"}},
		{"any ne true", "(x_ne(?))", []any{"bool"}},
		{"any lt 2026-01-01T00:00:00Z", "(x_lt(?))", []any{"time.Time"}},
		{"id eq null", "(e.id IS NULL)", nil}, // null never reaches Custom

		// Structure and precedence.
		{"name eq 'a' or name eq 'b' and not enabled eq true",
			"((e.name = ?) OR ((e.name = ?) AND (NOT (e.enabled = ?))))", []any{"a", "b", true}},
		{"(name eq 'a' or name eq 'b') and enabled eq true",
			"(((e.name = ?) OR (e.name = ?)) AND (e.enabled = ?))", []any{"a", "b", true}},
		{"version eq 1 and version eq 2 and version eq 3",
			"((e.version = ?) AND (e.version = ?) AND (e.version = ?))", []any{int64(1), int64(2), int64(3)}},
		{"version eq 1 and (version eq 2 and version eq 3)",
			"((e.version = ?) AND (e.version = ?) AND (e.version = ?))", []any{int64(1), int64(2), int64(3)}},
		{"version eq 1 or version eq 2 or version eq 3",
			"((e.version = ?) OR (e.version = ?) OR (e.version = ?))", []any{int64(1), int64(2), int64(3)}},
		{"not not (owner eq null or tags eq 'x')",
			"(NOT (NOT ((e.owner IS NULL) OR (EXISTS (SELECT 1 FROM json_each(e.tags) WHERE json_each.value IN (?))))))", []any{"x"}},
	}
	s := testSchema()
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			e, err := ParseFilter(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			sql, args, err := Compile(e, s)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if sql != tc.sql {
				t.Errorf("sql\n got: %s\nwant: %s", sql, tc.sql)
			}
			if !reflect.DeepEqual(args, tc.args) {
				t.Errorf("args\n got: %#v\nwant: %#v", args, tc.args)
			}
			if n := strings.Count(sql, "?"); n != len(args) {
				t.Errorf("%d placeholders for %d args", n, len(args))
			}
			for _, a := range args {
				if tm, ok := a.(time.Time); ok && tm.Location() != time.UTC {
					t.Errorf("time arg %v is not in UTC", tm)
				}
			}
		})
	}
}

func TestCompileFieldErrors(t *testing.T) {
	const allowed = "allowed: any, created_at, enabled, id, name, owner, score, status, tags, version"
	tests := []struct {
		in    string
		field string
		msg   string // exact FieldError message
	}{
		{"nope eq 1", "nope", "unknown field 'nope' in $filter (" + allowed + ")"},
		{"hidden eq 'x'", "hidden", "unknown field 'hidden' in $filter (" + allowed + ")"},
		{"contains(nope, 'x')", "nope", "unknown field 'nope' in $filter (" + allowed + ")"},
		{"nope in (1)", "nope", "unknown field 'nope' in $filter (" + allowed + ")"},
		{"status eq 'bogus'", "status", "value 'bogus' is not allowed for field 'status' in $filter (allowed: active, draft, archived)"},
		{"status in ('active', 'Active')", "status", "value 'Active' is not allowed for field 'status' in $filter (allowed: active, draft, archived)"},
		{"status lt 'active'", "status", "operator 'lt' is not allowed for field 'status' in $filter (allowed: eq, ne, in)"},
		{"contains(status, 'act')", "status", "operator 'contains' is not allowed for field 'status' in $filter (allowed: eq, ne, in)"},
		{"enabled gt false", "enabled", "operator 'gt' is not allowed for field 'enabled' in $filter (allowed: eq, ne)"},
		{"enabled in (true)", "enabled", "operator 'in' is not allowed for field 'enabled' in $filter (allowed: eq, ne)"},
		{"tags ne 'x'", "tags", "operator 'ne' is not allowed for field 'tags' in $filter (allowed: eq, in)"},
		{"startswith(version, '1')", "version", "operator 'startswith' is not allowed for field 'version' in $filter (allowed: eq, ne, lt, le, gt, ge, in)"},
		{"id ne 'x'", "id", "operator 'ne' is not allowed for field 'id' in $filter (allowed: eq, in)"},
		{"name eq 5", "name", "field 'name' in $filter expects a string in single quotes, got number 5"},
		{"name eq true", "name", "field 'name' in $filter expects a string in single quotes, got boolean true"},
		{"name eq 2026-01-01T00:00:00Z", "name", "field 'name' in $filter expects a string in single quotes, got date-time 2026-01-01T00:00:00Z"},
		{"contains(name, 5)", "name", "field 'name' in $filter expects a string in single quotes, got number 5"},
		{"tags in ('x', 1)", "tags", "field 'tags' in $filter expects a string in single quotes, got number 1"},
		{"status eq 1", "status", "field 'status' in $filter expects a string in single quotes, got number 1"},
		{"version eq 1.5", "version", "field 'version' in $filter expects an integer, got number 1.5"},
		{"version eq 1.0", "version", "field 'version' in $filter expects an integer, got number 1.0"},
		{"version eq '1'", "version", "field 'version' in $filter expects an integer, got string '1'"},
		{"score eq 'x'", "score", "field 'score' in $filter expects a number, got string 'x'"},
		{"enabled eq 1", "enabled", "field 'enabled' in $filter expects true or false, got number 1"},
		{"created_at eq 'yesterday'", "created_at", "field 'created_at' in $filter expects an RFC 3339 date-time such as 2026-01-01T00:00:00Z, got string 'yesterday'"},
		{"created_at eq 5", "created_at", "field 'created_at' in $filter expects an RFC 3339 date-time such as 2026-01-01T00:00:00Z, got number 5"},
		{"name lt null", "name", "null can only be used with eq or ne (field 'name' in $filter)"},
		{"name in ('a', null)", "name", "null is not allowed in an 'in' list (field 'name' in $filter); use 'name eq null'"},
		{"contains(name, null)", "name", "contains(name, ...) in $filter requires a non-null value"},
		{"name eq 'long " + strings.Repeat("x", 100) + "' and name eq 1", "name", "field 'name' in $filter expects a string in single quotes, got number 1"},
		{"status eq '" + strings.Repeat("x", 100) + "'", "status", "value '" + strings.Repeat("x", 63) + "... is not allowed for field 'status' in $filter (allowed: active, draft, archived)"},
		{"any eq null", "any", "field 'any' in $filter cannot be compared with null"},
		{"tags ne null", "tags", "operator 'ne' is not allowed for field 'tags' in $filter (allowed: eq, in)"},
		{"tags eq null", "tags", "field 'tags' in $filter cannot be compared with null"},
		{"id eq 'a**'", "id", "field 'id' in $filter: invalid id pattern"},
	}
	s := testSchema()
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			e, err := ParseFilter(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			sql, args, err := Compile(e, s)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Compile = %q %v, %v; want *FieldError", sql, args, err)
			}
			if sql != "" || args != nil {
				t.Errorf("Compile returned SQL %q / args %v with error", sql, args)
			}
			if fe.Field != tc.field || fe.Param != ParamFilter || fe.Error() != tc.msg {
				t.Errorf("error = {Field: %q, Param: %q, Msg: %q}\nwant field %q msg %q", fe.Field, fe.Param, fe.Error(), tc.field, tc.msg)
			}
		})
	}

	// Errors from Custom are wrapped.
	e, _ := ParseFilter("id eq 'a**'")
	if _, _, err := Compile(e, s); !errors.Is(err, errBadPattern) {
		t.Errorf("Custom error not wrapped: %v", err)
	}
	// A *FieldError returned by Custom is passed through unchanged.
	own := &FieldError{Param: ParamFilter, Field: "x", Msg: "custom message"}
	s2 := Schema{"x": {Filter: true, Custom: func(string, []any) (string, []any, error) { return "", nil, own }}}
	if _, _, err := Compile(cmp("x", "eq", lstr("v")), s2); err != own { //nolint:errorlint // the very value, not one wrapping it: passed through unchanged
		t.Errorf("Custom *FieldError = %v, want passed through", err)
	}
}

func TestCompileSchemaErrors(t *testing.T) {
	custom := func(string, []any) (string, []any, error) { return "c = ?", []any{1}, nil }
	tests := []struct {
		name string
		s    Schema
		e    Expr
	}{
		{"string array without Custom", Schema{"t": {Column: "t", Type: StringArray, Filter: true}}, cmp("t", "eq", lstr("x"))},
		{"custom type without Custom", Schema{"t": {Column: "t", Type: Custom, Filter: true}}, cmp("t", "eq", lstr("x"))},
		{"invalid type", Schema{"t": {Column: "t", Type: FieldType(99), Filter: true}}, cmp("t", "eq", lstr("x"))},
		{"empty column", Schema{"t": {Filter: true}}, cmp("t", "eq", lstr("x"))},
		{"enum without values", Schema{"t": {Column: "t", Type: Enum, Filter: true}}, cmp("t", "eq", lstr("x"))},
		{"unknown op in Ops", Schema{"t": {Column: "t", Filter: true, Ops: []string{"eq", "like"}}}, cmp("t", "eq", lstr("x"))},
		{"like op on int", Schema{"t": {Column: "t", Type: Int, Filter: true, Ops: []string{"contains"}}}, call("contains", "t", lstr("x"))},
		{"custom returns empty SQL", Schema{"t": {Filter: true, Custom: func(string, []any) (string, []any, error) { return " ", nil, nil }}}, cmp("t", "eq", lstr("x"))},
		{"nil left", Schema{"t": {Column: "t", Filter: true}}, &And{R: cmp("t", "eq", lstr("x"))}},
		{"nil right", Schema{"t": {Column: "t", Filter: true}}, &Or{L: cmp("t", "eq", lstr("x"))}},
		{"nil not", Schema{}, &Not{}},
		{"typed nil child", Schema{}, &Not{X: (*Compare)(nil)}},
		{"invalid compare op", Schema{"t": {Column: "t", Filter: true}}, cmp("t", "like", lstr("x"))},
		{"invalid func", Schema{"t": {Column: "t", Filter: true}}, call("lower", "t", lstr("x"))},
		{"empty in", Schema{"t": {Column: "t", Filter: true}}, in("t")},
		{"zero literal", Schema{"t": {Column: "t", Filter: true}}, cmp("t", "eq", Literal{})},
		{"bad literal kind", Schema{"t": {Column: "t", Type: Custom, Filter: true, Custom: custom}}, cmp("t", "eq", Literal{Kind: 42})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sql, args, err := Compile(tc.e, tc.s)
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("Compile = %q %v, %v; want *SchemaError", sql, args, err)
			}
			if !strings.HasPrefix(err.Error(), "odata: ") {
				t.Errorf("message %q", err.Error())
			}
		})
	}
}

func TestCompileNil(t *testing.T) {
	for _, e := range []Expr{nil, (*And)(nil), (*Compare)(nil)} {
		sql, args, err := Compile(e, nil)
		if sql != "" || args != nil || err != nil {
			t.Errorf("Compile(%#v) = %q, %v, %v", e, sql, args, err)
		}
	}
}

// sqlToken matches every token Compile may emit for testSchema (minus the
// Custom fields, which are trusted server code).
var sqlToken = regexp.MustCompile(`^(?:\s+|[()?,]|AND|OR|NOT|IS|NULL|IN|LIKE|ESCAPE|'\\'|=|<>|<=|>=|<|>|e\.(?:name|owner|status|created_at|score|version|enabled))`)

// checkSQLShape fails if sql contains anything but the tokens above.
func checkSQLShape(sql string) error {
	for rest := sql; rest != ""; {
		m := sqlToken.FindString(rest)
		if m == "" {
			return fmt.Errorf("unexpected SQL text at %q (in %q)", rest, sql)
		}
		rest = rest[len(m):]
	}
	return nil
}

func TestCompileInjection(t *testing.T) {
	hostile := []string{
		`'; DROP TABLE entrypoints; --`,
		`') OR 1=1 --`,
		`" OR ""="`,
		`\'; SELECT pg_sleep(10); --`,
		`%' OR name LIKE '%`,
		`*/ OR 1=1 /*`,
		"x\n) OR (1=1",
		`e.name`,
		`?`,
	}
	s := testSchema()
	delete(s, "tags")
	delete(s, "id")
	delete(s, "any")
	for _, v := range hostile {
		q := "'" + strings.ReplaceAll(v, "'", "''") + "'"
		filters := []string{
			"name eq " + q,
			"name in (" + q + ", " + q + ")",
			"startswith(name, " + q + ")",
			"contains(name, " + q + ") or not endswith(owner, " + q + ")",
			"status eq " + q,
			"created_at eq " + q,
		}
		for _, f := range filters {
			e, err := ParseFilter(f)
			if err != nil {
				t.Fatalf("ParseFilter(%q): %v", f, err)
			}
			sql, args, err := Compile(e, s)
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("Compile(%q): unexpected error type %T", f, err)
				}
				continue
			}
			if err := checkSQLShape(sql); err != nil {
				t.Fatalf("Compile(%q): %v", f, err)
			}
			if strings.Count(sql, "?") != len(args) {
				t.Fatalf("Compile(%q): placeholder/arg mismatch: %q %v", f, sql, args)
			}
			found := false
			for _, a := range args {
				if s, ok := a.(string); ok && (s == v || strings.Contains(s, likeEscaper.Replace(v))) {
					found = true
				}
			}
			if !found {
				t.Fatalf("Compile(%q): value not in args %v", f, args)
			}
		}
	}

	// Hostile field names cannot get through the parser...
	for _, f := range []string{
		"name; DROP TABLE x eq 1",
		"name) or (1 eq 1",
		"e.name eq 'x'",
		"name-- eq 1",
		"\"name\" eq 'x'",
		"name/**/eq 'x'",
		"contains(name) or 1 eq 1, 'x')",
	} {
		if e, err := ParseFilter(f); err == nil {
			if sql, _, err := Compile(e, s); err == nil {
				if err := checkSQLShape(sql); err != nil {
					t.Errorf("ParseFilter(%q) produced %s: %v", f, dump(e), err)
				}
			}
		}
	}
	// ...and a hand-built AST with one is rejected by the Schema lookup.
	for _, field := range []string{"e.name) OR (1=1", "name; DROP TABLE x", "name --"} {
		for _, e := range []Expr{cmp(field, "eq", lstr("x")), in(field, lstr("x")), call("contains", field, lstr("x"))} {
			sql, args, err := Compile(e, s)
			var fe *FieldError
			if !errors.As(err, &fe) || sql != "" || args != nil {
				t.Errorf("Compile with field %q = %q %v %v", field, sql, args, err)
			}
		}
	}
}
