package odata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseOrderBy(t *testing.T) {
	tests := []struct {
		in   string
		want []OrderItem
	}{
		{"", nil},
		{"  ", nil},
		{"name", []OrderItem{{Field: "name"}}},
		{"name asc", []OrderItem{{Field: "name"}}},
		{"name desc", []OrderItem{{Field: "name", Desc: true}}},
		{"created_at desc,name", []OrderItem{{Field: "created_at", Desc: true}, {Field: "name"}}},
		{"created_at desc,status asc", []OrderItem{{Field: "created_at", Desc: true}, {Field: "status"}}}, // 000's example
		{"status,entrypoint_id desc,created_at", []OrderItem{{Field: "status"}, {Field: "entrypoint_id", Desc: true}, {Field: "created_at"}}},
		{" a  desc ,\tb asc , c ", []OrderItem{{Field: "a", Desc: true}, {Field: "b"}, {Field: "c"}}},
		{"asc desc", []OrderItem{{Field: "asc", Desc: true}}},
		{"desc", []OrderItem{{Field: "desc"}}},
	}
	for _, tc := range tests {
		got, err := ParseOrderBy(tc.in)
		if err != nil {
			t.Errorf("ParseOrderBy(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseOrderBy(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		again, err := ParseOrderBy(FormatOrderBy(got))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("round trip of %q via %q: %+v, %v", tc.in, FormatOrderBy(got), again, err)
		}
	}
}

func TestParseOrderByErrors(t *testing.T) {
	tests := []struct {
		in  string
		pos int
		msg string
	}{
		{",", 1, "expected field name but found ','"},
		{"a,", 3, "expected field name but found end of input"},
		{"a,,b", 3, "expected field name but found ','"},
		{"a b", 3, "expected 'asc', 'desc', ',' or end of input but found 'b'"},
		{"a asc desc", 7, "expected ',' or end of input but found 'desc'"},
		{"a DESC", 3, "(keywords are lowercase: use 'desc')"},
		{"a desc, b, a asc", 12, "duplicate field 'a'"},
		{"a b,", 3, "found 'b'"},
		{"a-b", 2, "unexpected character '-'"},
		{"a/b", 2, "unexpected character '/'"},
		{"'a'", 1, "expected field name but found string 'a'"},
		{"1", 1, "expected field name but found number 1"},
		{"(a)", 1, "found '('"},
		{"a desc 'x", 8, "unterminated string literal"},
		{"a\xff", 2, "invalid UTF-8"},
		{strings.Repeat("a", MaxInputLen+1), MaxInputLen + 1, "input too long"},
	}
	for _, tc := range tests {
		items, err := ParseOrderBy(tc.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseOrderBy(%.40q) = %+v, %v; want *SyntaxError", tc.in, items, err)
			continue
		}
		if se.Pos != tc.pos || !strings.Contains(se.Msg, tc.msg) || se.Param != ParamOrderBy {
			t.Errorf("ParseOrderBy(%.40q) error = %s %d %q, want pos %d containing %q", tc.in, se.Param, se.Pos, se.Msg, tc.pos, tc.msg)
		}
		if items != nil {
			t.Errorf("ParseOrderBy(%.40q) returned items with error", tc.in)
		}
	}
}

func TestCheckOrderBy(t *testing.T) {
	s := Schema{
		"name":       {Column: "e.name", Sort: true, Filter: true},
		"created_at": {Column: "e.created_at", Type: Time, Sort: true},
		"secret":     {Column: "e.secret", Filter: true},
	}
	items, err := ParseOrderBy("created_at desc, name")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckOrderBy(items, s); err != nil {
		t.Fatal(err)
	}
	sql, err := CompileOrderBy(items, s)
	if err != nil || sql != "e.created_at DESC, e.name ASC" {
		t.Fatalf("CompileOrderBy = %q, %v", sql, err)
	}
	if sql, err := CompileOrderBy(nil, s); sql != "" || err != nil {
		t.Fatalf("CompileOrderBy(nil) = %q, %v", sql, err)
	}

	for _, field := range []string{"secret", "nope"} {
		err := CheckOrderBy([]OrderItem{{Field: "name"}, {Field: field}}, s)
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("CheckOrderBy(%s): %v", field, err)
		}
		want := "unknown field '" + field + "' in $orderby (allowed: created_at, name)"
		if fe.Field != field || fe.Param != ParamOrderBy || err.Error() != want {
			t.Errorf("CheckOrderBy(%s) = %+v, want message %q", field, fe, want)
		}
		if _, err := CompileOrderBy([]OrderItem{{Field: field}}, s); !errors.As(err, &fe) {
			t.Errorf("CompileOrderBy(%s) = %v", field, err)
		}
	}

	var se *SchemaError
	_, err = CompileOrderBy([]OrderItem{{Field: "x"}}, Schema{"x": {Sort: true}})
	if !errors.As(err, &se) {
		t.Errorf("missing Column: %v", err)
	}
}
