package odata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var filterSeeds = []string{
	"",
	"a eq 1",
	"name eq 'it''s' and not (status in ('active','draft') or version ge -3)",
	"contains(name,'a%_\\') or startswith(owner, '') and endswith(name, 'x')",
	"created_at gt 2026-01-01T00:00:00.000Z and created_at lt 2026-01-01T00:00:00+02:00",
	"score le 12.50 and score gt -0.5 and enabled eq true and owner eq null",
	"not not not a eq 9223372036854775808",
	"((a eq 1)) or (b eq 2 and (c eq 3 or d eq 4))",
	"a in (1, 2.5, true, null, 'x', 2026-06-30T23:59:59.123456789-05:30)",
	"tags eq 'x' and id in ('gts.a.*', 'b')",
	"a eq 'x", "a eq 1.2.3", "a EQ 1", "tolower(a) eq 'x'", "a eq 2026-02-30T00:00:00Z",
	"(((((((((((((((((((((((((((((((((a eq 1)))))))))))))))))))))))))))))))))",
	"a eq 'é\xff'", "a eq '\x00'",
}

// fuzzSchema is testSchema; Compile must never panic on whatever parses.
func FuzzParseFilter(f *testing.F) {
	for _, s := range filterSeeds {
		f.Add(s)
	}
	schema := testSchema()
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseFilter(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error is %T, not *SyntaxError: %v", err, err)
			}
			if e != nil {
				t.Fatalf("non-nil Expr with error")
			}
			if se.Param != ParamFilter || se.Pos < 1 || se.Pos > min(len(s), MaxInputLen)+1 {
				t.Fatalf("bad error position/param: %+v for input of %d bytes", se, len(s))
			}
			return
		}
		if e == nil {
			if strings.Trim(s, " \t\r\n") != "" {
				t.Fatalf("nil Expr for non-blank input %q", s)
			}
			return
		}
		text := Format(e)
		if len(text) <= MaxInputLen {
			e2, err := ParseFilter(text)
			if err != nil {
				t.Fatalf("Format output does not parse: %v\ninput:  %q\nformat: %q", err, s, text)
			}
			if !exprEqual(e, e2, false) {
				t.Fatalf("round trip mismatch\ninput:  %q\nformat: %q\n got: %s\nwant: %s", s, text, dump(e2), dump(e))
			}
			if again := Format(e2); again != text {
				t.Fatalf("Format not stable: %q vs %q", again, text)
			}
		}
		sql, args, err := Compile(e, schema)
		if err == nil && strings.Count(sql, "?") != len(args) {
			t.Fatalf("placeholders/args mismatch: %q %v", sql, args)
		}
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("Compile error is %T, not *FieldError: %v", err, err)
		}
	})
}

func FuzzParseOrderBy(f *testing.F) {
	for _, s := range []string{"", "a", "a desc", "created_at desc, name asc,id", "a,,b", "a b", "a asc desc", "a, a", "a DESC", "'x'"} {
		f.Add(s)
	}
	schema := testSchema()
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseOrderBy(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error is %T, not *SyntaxError: %v", err, err)
			}
			if items != nil || se.Param != ParamOrderBy || se.Pos < 1 || se.Pos > min(len(s), MaxInputLen)+1 {
				t.Fatalf("bad error: %+v (items %v) for input of %d bytes", se, items, len(s))
			}
			return
		}
		if (items == nil) != (strings.Trim(s, " \t\r\n") == "") {
			t.Fatalf("items %v for input %q", items, s)
		}
		text := FormatOrderBy(items)
		if len(text) > len(s) {
			t.Fatalf("FormatOrderBy grew the input: %q -> %q", s, text)
		}
		again, err := ParseOrderBy(text)
		if err != nil || !reflect.DeepEqual(again, items) {
			t.Fatalf("round trip of %q via %q: %+v, %v", s, text, again, err)
		}
		_ = CheckOrderBy(items, schema)
		_, _ = CompileOrderBy(items, schema)
	})
}
