package odata

import (
	"fmt"
	"time"
)

// Literal constructors for tests. Raw is left empty; compare with
// exprEqual(..., false) unless Raw is set explicitly.

func lstr(s string) Literal { return Literal{Kind: LitString, Str: s} }
func lint(i int64) Literal  { return Literal{Kind: LitNumber, IsInt: true, Int: i, Num: float64(i)} }
func ldec(f float64) Literal {
	return Literal{Kind: LitNumber, Num: f}
}
func lbool(b bool) Literal      { return Literal{Kind: LitBool, Bool: b} }
func lnull() Literal            { return Literal{Kind: LitNull} }
func ltime(t time.Time) Literal { return Literal{Kind: LitTime, Time: t} }

func cmp(field, op string, v Literal) *Compare { return &Compare{Field: field, Op: op, Value: v} }
func and(l, r Expr) *And                       { return &And{L: l, R: r} }
func or(l, r Expr) *Or                         { return &Or{L: l, R: r} }
func not(x Expr) *Not                          { return &Not{X: x} }
func in(field string, vs ...Literal) *In       { return &In{Field: field, Values: vs} }
func call(fn, field string, v Literal) *Call   { return &Call{Func: fn, Field: field, Value: v} }

// literalEqual compares literals; times are equal if they denote the same
// instant with the same UTC offset (the *time.Location pointer is ignored).
func literalEqual(a, b Literal, withRaw bool) bool {
	if a.Kind != b.Kind || (withRaw && a.Raw != b.Raw) {
		return false
	}
	switch a.Kind {
	case LitString:
		return a.Str == b.Str
	case LitNumber:
		if a.IsInt != b.IsInt {
			return false
		}
		if a.IsInt {
			return a.Int == b.Int && a.Num == b.Num
		}
		return a.Num == b.Num
	case LitBool:
		return a.Bool == b.Bool
	case LitNull:
		return true
	case LitTime:
		_, oa := a.Time.Zone()
		_, ob := b.Time.Zone()
		return a.Time.Equal(b.Time) && oa == ob
	}
	return false
}

// exprEqual compares two expressions structurally.
func exprEqual(a, b Expr, withRaw bool) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case *And:
		y, ok := b.(*And)
		return ok && exprEqual(x.L, y.L, withRaw) && exprEqual(x.R, y.R, withRaw)
	case *Or:
		y, ok := b.(*Or)
		return ok && exprEqual(x.L, y.L, withRaw) && exprEqual(x.R, y.R, withRaw)
	case *Not:
		y, ok := b.(*Not)
		return ok && exprEqual(x.X, y.X, withRaw)
	case *Compare:
		y, ok := b.(*Compare)
		return ok && x.Field == y.Field && x.Op == y.Op && literalEqual(x.Value, y.Value, withRaw)
	case *In:
		y, ok := b.(*In)
		if !ok || x.Field != y.Field || len(x.Values) != len(y.Values) {
			return false
		}
		for i := range x.Values {
			if !literalEqual(x.Values[i], y.Values[i], withRaw) {
				return false
			}
		}
		return true
	case *Call:
		y, ok := b.(*Call)
		return ok && x.Func == y.Func && x.Field == y.Field && literalEqual(x.Value, y.Value, withRaw)
	}
	return false
}

// dump renders an expression tree unambiguously for failure messages.
func dump(e Expr) string {
	switch x := e.(type) {
	case nil:
		return "nil"
	case *And:
		return "And(" + dump(x.L) + ", " + dump(x.R) + ")"
	case *Or:
		return "Or(" + dump(x.L) + ", " + dump(x.R) + ")"
	case *Not:
		return "Not(" + dump(x.X) + ")"
	case *Compare:
		return fmt.Sprintf("Compare(%s %s %+v)", x.Field, x.Op, x.Value)
	case *In:
		return fmt.Sprintf("In(%s %+v)", x.Field, x.Values)
	case *Call:
		return fmt.Sprintf("Call(%s %s %+v)", x.Func, x.Field, x.Value)
	}
	return fmt.Sprintf("%T", e)
}
