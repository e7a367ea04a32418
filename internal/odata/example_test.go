package odata_test

import (
	"errors"
	"fmt"

	"github.com/larkrun/lark/internal/odata"
)

func Example() {
	schema := odata.Schema{
		"name":       {Column: "e.name", Type: odata.String, Filter: true, Sort: true},
		"status":     {Column: "e.status", Type: odata.Enum, Enum: []string{"active", "draft"}, Filter: true},
		"created_at": {Column: "e.created_at", Type: odata.Time, Filter: true, Sort: true},
	}

	expr, err := odata.ParseFilter("status in ('active','draft') and (startswith(name,'web_') or created_at ge 2026-01-01T00:00:00+02:00)")
	if err != nil {
		panic(err)
	}
	where, args, err := odata.Compile(expr, schema)
	if err != nil {
		panic(err)
	}
	fmt.Println(where)
	fmt.Println(args...)

	order, err := odata.ParseOrderBy("created_at desc, name")
	if err != nil {
		panic(err)
	}
	orderSQL, err := odata.CompileOrderBy(order, schema)
	if err != nil {
		panic(err)
	}
	fmt.Println(orderSQL)

	// Client mistakes are typed errors, suitable for a 400 response.
	_, err = odata.ParseFilter("name eq 'x' AND status eq 'y'")
	var se *odata.SyntaxError
	fmt.Println(errors.As(err, &se), se.Pos, err)

	expr, _ = odata.ParseFilter("owner eq 'bob'")
	_, _, err = odata.Compile(expr, schema)
	var fe *odata.FieldError
	fmt.Println(errors.As(err, &fe), err)

	// Output:
	// ((e.status IN (?, ?)) AND ((e.name LIKE ? ESCAPE '\') OR (e.created_at >= ?)))
	// active draft web\_% 2025-12-31 22:00:00 +0000 UTC
	// e.created_at DESC, e.name ASC
	// true 13 $filter: syntax error at position 13: expected 'and', 'or' or end of input but found 'AND' (keywords are lowercase: use 'and')
	// true unknown field 'owner' in $filter (allowed: created_at, name, status)
}

func ExampleFormat() {
	e, _ := odata.ParseFilter("((a eq 1) and (b eq 'it''s')) or not(c in (1.50,2026-01-01T00:00:00.000Z))")
	fmt.Println(odata.Format(e))
	// Output: a eq 1 and b eq 'it''s' or not c in (1.5, 2026-01-01T00:00:00Z)
}
