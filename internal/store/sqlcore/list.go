package sqlcore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// ListSpec describes one listable resource for keyset pagination (ListPage).
type ListSpec[T any] struct {
	// From is the table (or join) the rows come from.
	From string
	// Cols are the selected columns, in scan order.
	Cols string
	// Fields maps the OData field names to their columns and abilities.
	Fields odata.Schema
	// DefaultOrder is the order of a query without $orderby.
	DefaultOrder []odata.OrderItem
	// Scope is the WHERE fragment that scopes the list (tenant, visibility); ScopeArgs its arguments.
	Scope     string
	ScopeArgs []any
	// Scan reads one row of Cols; the list appends the order columns after them and reads those
	// itself, so a cursor holds the values exactly as stored.
	Scan func(Scanner) (T, error)
	// Nullable names the sortable fields whose column may be NULL: they are ordered and compared
	// as coalesce(column, ''), so that NULL sorts first and a keyset comparison never meets NULL.
	Nullable map[string]bool
	// Split names the filterable fields, in order of preference, whose "in" lists (or "or"s of
	// "eq") are read one value at a time and merged (splitIn): each has an index on (scope, field,
	// default order).
	Split []string
}

// extraScanner scans a row into the item's destinations followed by extra ones.
type extraScanner struct {
	rows  *sql.Rows
	extra []any
}

// Scan implements Scanner.
func (e extraScanner) Scan(dest ...any) error {
	return e.rows.Scan(append(dest, e.extra...)...)
}

// cursor is the opaque page token: the sort key of the boundary row, the direction and a hash of the
// query so that a cursor cannot be replayed against a different filter or order.
type cursor struct {
	Values []any  `json:"v"`
	Prev   bool   `json:"p,omitempty"`
	Query  string `json:"q"`
}

func queryHash(q store.ListQuery, order []odata.OrderItem) string {
	f := ""
	if q.Filter != nil {
		f = odata.Format(q.Filter)
	}
	sum := sha256.Sum256([]byte(f + "\x00" + odata.FormatOrderBy(order)))
	return hex.EncodeToString(sum[:6])
}

func encodeCursor(c cursor) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode a page cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, &store.QueryError{Err: fmt.Errorf("cursor: %w", store.ErrBadCursor)}
	}
	return c, nil
}

// ListPage reads one page of spec's rows that match lq, with keyset pagination: the page's cursors
// hold the sort key of its boundary rows and a hash of the filter and order, so that a cursor of
// another query is refused (store.ErrBadCursor).
func ListPage[T any](ctx context.Context, q Querier, spec ListSpec[T], lq store.ListQuery) (store.Page[T], error) {
	var page store.Page[T]
	limit := lq.Limit
	if limit <= 0 {
		limit = store.DefaultLimit
	}
	if limit > store.MaxLimit {
		limit = store.MaxLimit
	}
	if lq.Filter != nil { // a bad filter is reported before a bad order or cursor
		if _, _, err := odata.Compile(lq.Filter, spec.Fields); err != nil {
			return page, &store.QueryError{Err: err}
		}
	}
	order := lq.OrderBy
	if len(order) == 0 {
		order = spec.DefaultOrder
	}
	if err := odata.CheckOrderBy(order, spec.Fields); err != nil {
		return page, &store.QueryError{Err: err}
	}
	cols := make([]string, 0, len(order)+1)
	desc := make([]bool, 0, len(order)+1)
	for _, o := range order {
		col := spec.Fields[o.Field].Column
		if spec.Nullable[o.Field] {
			col = "coalesce(" + col + ", '')"
		}
		cols = append(cols, col)
		desc = append(desc, o.Desc)
	}
	cols = append(cols, "id")
	desc = append(desc, false)
	hash := queryHash(lq, order)
	var cur cursor
	if lq.Cursor != "" {
		var err error
		if cur, err = decodeCursor(lq.Cursor); err != nil {
			return page, err
		}
		if cur.Query != hash || len(cur.Values) != len(cols) {
			return page, &store.QueryError{Err: fmt.Errorf("cursor does not belong to this query: %w", store.ErrBadCursor)}
		}
	}
	query, qargs, err := pageQuery(spec, lq.Filter, keysetOf{cols: cols, desc: desc, cur: cur, resume: lq.Cursor != ""}, limit)
	if err != nil {
		return page, err
	}
	rows, err := q.QueryContext(ctx, query, Args(qargs)...)
	if err != nil {
		return page, fmt.Errorf("list %s: %w", spec.From, err)
	}
	defer rows.Close()
	var keys [][]any
	for rows.Next() {
		key := make([]any, len(cols))
		dest := make([]any, len(cols))
		for i := range key {
			dest[i] = &key[i]
		}
		item, err := spec.Scan(extraScanner{rows: rows, extra: dest})
		if err != nil {
			return page, err
		}
		for i, v := range key {
			if b, ok := v.([]byte); ok {
				key[i] = string(b)
			}
		}
		page.Items = append(page.Items, item)
		keys = append(keys, key)
	}
	if err := rows.Err(); err != nil {
		return page, err
	}
	extra := len(page.Items) > limit
	if extra {
		page.Items = page.Items[:limit]
		keys = keys[:limit]
	}
	keyOf := func(i int) []any { return keys[i] }
	if cur.Prev {
		for i, j := 0, len(page.Items)-1; i < j; i, j = i+1, j-1 {
			page.Items[i], page.Items[j] = page.Items[j], page.Items[i]
			keys[i], keys[j] = keys[j], keys[i]
		}
		page.HasMore = len(page.Items) > 0
		if len(page.Items) > 0 {
			if page.NextCursor, err = encodeCursor(cursor{Values: keyOf(len(page.Items) - 1), Query: hash}); err != nil {
				return page, err
			}
			if extra {
				if page.PrevCursor, err = encodeCursor(cursor{Values: keyOf(0), Prev: true, Query: hash}); err != nil {
					return page, err
				}
			}
		}
		return page, nil
	}
	page.HasMore = extra
	if extra {
		if page.NextCursor, err = encodeCursor(cursor{Values: keyOf(len(page.Items) - 1), Query: hash}); err != nil {
			return page, err
		}
	}
	if lq.Cursor != "" && len(page.Items) > 0 {
		if page.PrevCursor, err = encodeCursor(cursor{Values: keyOf(0), Prev: true, Query: hash}); err != nil {
			return page, err
		}
	}
	return page, nil
}

// keyset builds the "after this row" predicate for a multi-column order:
// (c1 > v1) OR (c1 = v1 AND c2 > v2) OR ..., with > and < chosen per column direction and flipped
// when paging backwards. Every sortable column is NOT NULL, so plain comparisons are exact.
// It starts with c1 >= v1 (implied by the rest): PostgreSQL's planner makes an index bound of that
// term but not of the OR, so a page far into a list starts where the previous one ended instead of
// walking the index from the list's first row.
func keyset(cols []string, desc []bool, vals []any, prev bool) (string, []any) {
	var terms []string
	var a []any
	lead := ">="
	if desc[0] != prev {
		lead = "<="
	}
	bound := cols[0] + " " + lead + " ? AND "
	a = append(a, vals[0])
	for i := range cols {
		var conj []string
		for j := 0; j < i; j++ {
			conj = append(conj, cols[j]+" = ?")
			a = append(a, vals[j])
		}
		op := ">"
		if desc[i] != prev {
			op = "<"
		}
		conj = append(conj, cols[i]+" "+op+" ?")
		a = append(a, vals[i])
		terms = append(terms, "("+strings.Join(conj, " AND ")+")")
	}
	return "(" + bound + "(" + strings.Join(terms, " OR ") + "))", a
}
