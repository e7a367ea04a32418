package sqlcore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// maxSplit is the most values a filter's "in" list may have to be split (splitIn): each value is
// a branch that reads up to a page, so the bound on the rows read is maxSplit pages.
const maxSplit = 16

// splitIn rewrites a filter whose top-level conjunction holds "f in (v1, ..., vn)" (or
// "f eq v1 or ... or f eq vn") on one of the fields split names (in order of preference) as n
// filters, each with "f eq vi" in its place; it returns nil when there is nothing to split.
//
// Why: an index on (scope, f, order columns) returns the rows of one value of f in the list's
// order, so a page of "f eq v" reads one page of the index. For "f in (...)" neither SQLite nor
// PostgreSQL 15 merges the values' ranges in order: they read every row of every value and sort
// them, or walk the order index and test each row, which for values that match few rows reads the
// whole scope (a tenant's whole history). ListPage runs the n filters as branches of a UNION ALL,
// each one limited to a page in the list's order, and takes the page from their merged rows:
// at most n pages are read, whatever the store holds.
func splitIn(e odata.Expr, split []string) []odata.Expr {
	if e == nil {
		return nil
	}
	conj := conjuncts(e, nil)
	for _, f := range split {
		for i, c := range conj {
			vals := inValues(c, f)
			if len(vals) < 2 || len(vals) > maxSplit {
				continue
			}
			out := make([]odata.Expr, 0, len(vals))
			for _, v := range vals {
				arm := slices.Clone(conj)
				arm[i] = &odata.Compare{Field: f, Op: "eq", Value: v}
				out = append(out, join(arm))
			}
			return out
		}
	}
	return nil
}

// conjuncts appends the operands of e's top-level "and"s to out.
func conjuncts(e odata.Expr, out []odata.Expr) []odata.Expr {
	if a, ok := e.(*odata.And); ok {
		return conjuncts(a.R, conjuncts(a.L, out))
	}
	return append(out, e)
}

// join is the conjunction of es (at least one).
func join(es []odata.Expr) odata.Expr {
	out := es[0]
	for _, e := range es[1:] {
		out = &odata.And{L: out, R: e}
	}
	return out
}

// inValues are the values of "f in (...)" or of "f eq a or f eq b or ...", with duplicates
// removed, or nil when e is neither.
func inValues(e odata.Expr, f string) []odata.Literal {
	var vals []odata.Literal
	switch x := e.(type) {
	case *odata.In:
		if x.Field != f {
			return nil
		}
		vals = x.Values
	case *odata.Or:
		l, r := inValues(x.L, f), inValues(x.R, f)
		if l == nil || r == nil {
			return nil
		}
		vals = append(slices.Clone(l), r...)
	case *odata.Compare:
		if x.Field != f || x.Op != "eq" || x.Value.Kind == odata.LitNull {
			return nil
		}
		return []odata.Literal{x.Value}
	default:
		return nil
	}
	var out []odata.Literal
	for _, v := range vals {
		if !slices.ContainsFunc(out, func(o odata.Literal) bool { return odata.FormatLiteral(o) == odata.FormatLiteral(v) }) {
			out = append(out, v)
		}
	}
	return out
}

// keysetOf is a page's order (its columns, directions) and where it resumes.
type keysetOf struct {
	cols   []string
	desc   []bool
	cur    cursor
	resume bool // the page follows cur (a cursor was given)
}

// pageQuery is the statement of one page of spec's rows matching filter, in ks's order from its
// cursor, limit+1 rows (the extra one says whether more follow), and its arguments. A filter that
// splitIn splits is read as a UNION ALL of its branches, each limited to limit+1 rows in the same
// order, merged by the outer ORDER BY: the branches' order columns are selected under the names
// lark_k0, lark_k1, ... for it (the rows' columns are the same as without a split).
func pageQuery[T any](spec ListSpec[T], filter odata.Expr, ks keysetOf, limit int) (string, []any, error) {
	arms := splitIn(filter, spec.Split)
	if arms == nil {
		return armQuery(spec, filter, ks, limit, false)
	}
	var sb strings.Builder
	var args []any
	for i, arm := range arms {
		q, a, err := armQuery(spec, arm, ks, limit, true)
		if err != nil {
			return "", nil, err
		}
		if i > 0 {
			sb.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&sb, "SELECT * FROM (%s) AS lark_b%d", q, i)
		args = append(args, a...)
	}
	sb.WriteString(" ORDER BY ")
	for i := range ks.cols {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "lark_k%d", i)
		if ks.desc[i] != ks.cur.Prev {
			sb.WriteString(" DESC")
		}
	}
	fmt.Fprintf(&sb, " LIMIT %d", limit+1)
	return sb.String(), args, nil
}

// armQuery is the SELECT of one page of spec's rows matching filter (see pageQuery); named says to
// name the order columns lark_k<i>.
func armQuery[T any](spec ListSpec[T], filter odata.Expr, ks keysetOf, limit int, named bool) (string, []any, error) {
	where := []string{}
	var args []any
	if spec.Scope != "" {
		where = append(where, spec.Scope)
		args = append(args, spec.ScopeArgs...)
	}
	if filter != nil {
		w, a, err := odata.Compile(filter, spec.Fields)
		if err != nil {
			return "", nil, &store.QueryError{Err: err}
		}
		if w != "" {
			where = append(where, w)
			args = append(args, a...)
		}
	}
	if ks.resume {
		w, a := keyset(ks.cols, ks.desc, ks.cur.Values, ks.cur.Prev)
		where = append(where, w)
		args = append(args, a...)
	}
	var sb strings.Builder
	sb.WriteString("SELECT ")
	sb.WriteString(spec.Cols)
	for i, c := range ks.cols {
		sb.WriteString(", ")
		sb.WriteString(c)
		if named {
			fmt.Fprintf(&sb, " AS lark_k%d", i)
		}
	}
	sb.WriteString(" FROM ")
	sb.WriteString(spec.From)
	if len(where) > 0 {
		sb.WriteString(" WHERE ")
		sb.WriteString(strings.Join(where, " AND "))
	}
	sb.WriteString(" ORDER BY ")
	for i, c := range ks.cols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(c)
		if ks.desc[i] != ks.cur.Prev {
			sb.WriteString(" DESC")
		}
	}
	fmt.Fprintf(&sb, " LIMIT %d", limit+1)
	return sb.String(), args, nil
}
