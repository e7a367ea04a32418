package odata

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"pgregory.net/rapid"
)

var fieldNames = []string{
	"a", "name", "_x", "A_b9", "created_at",
	// Words that are keywords elsewhere but valid field names.
	"contains", "startswith", "endswith", "asc", "desc", "order", "notes", "inner", "nullable", "true_", "AND", "Eq",
}

func drawField(t *rapid.T) string {
	return rapid.OneOf(
		rapid.SampledFrom(fieldNames),
		rapid.StringMatching(`[A-Za-z_][A-Za-z0-9_]{0,12}`).Filter(func(s string) bool { return !reservedWords[s] }),
	).Draw(t, "field")
}

func drawLiteral(t *rapid.T) Literal {
	var l Literal
	switch rapid.IntRange(0, 6).Draw(t, "litkind") {
	case 0:
		l = Literal{Kind: LitString, Str: rapid.StringOf(rapid.Rune().Filter(func(r rune) bool {
			return r != 0 && utf8.ValidRune(r)
		})).Draw(t, "str")}
	case 1:
		// Strings heavy in characters that need escaping.
		l = Literal{Kind: LitString, Str: rapid.StringOf(rapid.SampledFrom([]rune("'' a%_\\()é,"))).Draw(t, "tricky")}
	case 2:
		i := rapid.Int64().Draw(t, "int")
		l = Literal{Kind: LitNumber, IsInt: true, Int: i, Num: float64(i)}
	case 3:
		f := rapid.OneOf(
			rapid.Float64Range(-1e6, 1e6),
			rapid.Float64().Filter(func(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }),
			rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e21, 5e-324, math.MaxFloat64}),
		).Draw(t, "float")
		l = Literal{Kind: LitNumber, Num: f}
	case 4:
		l = Literal{Kind: LitBool, Bool: rapid.Bool().Draw(t, "bool")}
	case 5:
		l = Literal{Kind: LitNull}
	case 6:
		loc := time.UTC
		if rapid.Bool().Draw(t, "offset?") {
			loc = time.FixedZone("", 60*rapid.IntRange(-(23*60+59), 23*60+59).Draw(t, "offset"))
		}
		ns := 0
		if rapid.Bool().Draw(t, "frac?") {
			ns = rapid.IntRange(0, 999999999).Draw(t, "ns")
		}
		l = Literal{Kind: LitTime, Time: time.Date(
			rapid.IntRange(0, 9999).Draw(t, "year"),
			time.Month(rapid.IntRange(1, 12).Draw(t, "month")),
			rapid.IntRange(1, 28).Draw(t, "day"),
			rapid.IntRange(0, 23).Draw(t, "hour"),
			rapid.IntRange(0, 59).Draw(t, "min"),
			rapid.IntRange(0, 59).Draw(t, "sec"),
			ns, loc)}
	}
	l.Raw = FormatLiteral(l) // what ParseFilter will record for canonical text
	return l
}

func drawExpr(t *rapid.T, depth int, field func(*rapid.T) string) Expr {
	kind := rapid.IntRange(0, 5).Draw(t, "kind")
	if depth <= 0 {
		kind = rapid.IntRange(3, 5).Draw(t, "leaf")
	}
	switch kind {
	case 0:
		return &And{L: drawExpr(t, depth-1, field), R: drawExpr(t, depth-1, field)}
	case 1:
		return &Or{L: drawExpr(t, depth-1, field), R: drawExpr(t, depth-1, field)}
	case 2:
		return &Not{X: drawExpr(t, depth-1, field)}
	case 3:
		op := rapid.SampledFrom([]string{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}).Draw(t, "op")
		return &Compare{Field: field(t), Op: op, Value: drawLiteral(t)}
	case 4:
		n := rapid.IntRange(1, 4).Draw(t, "n")
		x := &In{Field: field(t)}
		for range n {
			x.Values = append(x.Values, drawLiteral(t))
		}
		return x
	default:
		fn := rapid.SampledFrom([]string{FuncStartsWith, FuncEndsWith, FuncContains}).Draw(t, "func")
		return &Call{Func: fn, Field: field(t), Value: drawLiteral(t)}
	}
}

// TestFormatRoundTrip: for any AST, ParseFilter(Format(e)) equals e
// (including Literal.Raw, which for canonical text is FormatLiteral).
func TestFormatRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := drawExpr(t, rapid.IntRange(0, 5).Draw(t, "depth"), drawField)
		text := Format(e)
		if len(text) > MaxInputLen {
			t.Skip("rendered text exceeds MaxInputLen")
		}
		got, err := ParseFilter(text)
		if err != nil {
			t.Fatalf("ParseFilter(Format(e)) failed: %v\ntext: %s\nexpr: %s", err, text, dump(e))
		}
		if !exprEqual(got, e, true) {
			t.Fatalf("round trip mismatch\ntext: %s\n got: %s\nwant: %s", text, dump(got), dump(e))
		}
		if again := Format(got); again != text {
			t.Fatalf("Format not stable: %q vs %q", again, text)
		}
	})
}

// TestCompileProperty: compiling random ASTs against testSchema never
// panics, placeholders match args, and with only built-in fields the SQL
// contains nothing but schema columns and fixed keywords.
func TestCompileProperty(t *testing.T) {
	s := testSchema()
	builtin := testSchema()
	delete(builtin, "tags")
	delete(builtin, "id")
	delete(builtin, "any")
	names := []string{"nope", "hidden"}
	for n := range s {
		names = append(names, n)
	}
	field := func(t *rapid.T) string { return rapid.SampledFrom(names).Draw(t, "field") }
	rapid.Check(t, func(t *rapid.T) {
		e := drawExpr(t, rapid.IntRange(0, 4).Draw(t, "depth"), field)
		for _, schema := range []Schema{s, builtin} {
			sql, args, err := Compile(e, schema)
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				if sql != "" || args != nil {
					t.Fatalf("SQL returned with error")
				}
				continue
			}
			if strings.Count(sql, "?") != len(args) {
				t.Fatalf("placeholders/args mismatch: %q %v", sql, args)
			}
			if len(schema) == len(builtin) {
				if err := checkSQLShape(sql); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func TestFormat(t *testing.T) {
	tests := []struct {
		e    Expr
		want string
	}{
		{nil, ""},
		{(*Or)(nil), ""},
		{or(cmp("a", "eq", lint(1)), and(cmp("b", "eq", lstr("it's")), not(cmp("c", "ne", lnull())))),
			"a eq 1 or b eq 'it''s' and not c ne null"},
		{and(or(cmp("a", "eq", lint(1)), cmp("b", "eq", lint(2))), cmp("c", "eq", lbool(true))),
			"(a eq 1 or b eq 2) and c eq true"},
		{and(cmp("a", "eq", lint(1)), and(cmp("b", "eq", lint(2)), cmp("c", "eq", lint(3)))),
			"a eq 1 and (b eq 2 and c eq 3)"},
		{not(and(cmp("a", "eq", ldec(1)), not(call("contains", "b", lstr("x"))))),
			"not (a eq 1.0 and not contains(b, 'x'))"},
		{in("a", ldec(-0.5), lint(-3), ltime(time.Date(2026, 1, 1, 0, 0, 0, 1000, time.FixedZone("", 3600)))),
			"a in (-0.5, -3, 2026-01-01T00:00:00.000001+01:00)"},
		{ldecExpr(1e21), "a eq 1000000000000000000000.0"},
		// Invalid ASTs render something, without panicking.
		{&And{}, "<nil> and <nil>"},
		{cmp("a", "eq", Literal{}), "a eq <invalid>"},
		{cmp("a", "eq", ldec(math.NaN())), "a eq NaN"},
	}
	for _, tc := range tests {
		if got := Format(tc.e); got != tc.want {
			t.Errorf("Format(%s) = %q, want %q", dump(tc.e), got, tc.want)
		}
	}
}

func ldecExpr(f float64) Expr { return cmp("a", "eq", ldec(f)) }
