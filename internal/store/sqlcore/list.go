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
	where := []string{}
	var qargs []any
	if spec.Scope != "" {
		where = append(where, spec.Scope)
		qargs = append(qargs, spec.ScopeArgs...)
	}
	if lq.Filter != nil {
		w, a, err := odata.Compile(lq.Filter, spec.Fields)
		if err != nil {
			return page, &store.QueryError{Err: err}
		}
		if w != "" {
			where = append(where, w)
			qargs = append(qargs, a...)
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
		w, a := keyset(cols, desc, cur.Values, cur.Prev)
		where = append(where, w)
		qargs = append(qargs, a...)
	}
	var sb strings.Builder
	sb.WriteString("SELECT ")
	sb.WriteString(spec.Cols)
	for _, c := range cols {
		sb.WriteString(", ")
		sb.WriteString(c)
	}
	sb.WriteString(" FROM ")
	sb.WriteString(spec.From)
	if len(where) > 0 {
		sb.WriteString(" WHERE ")
		sb.WriteString(strings.Join(where, " AND "))
	}
	sb.WriteString(" ORDER BY ")
	for i, c := range cols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(c)
		if desc[i] != cur.Prev {
			sb.WriteString(" DESC")
		}
	}
	fmt.Fprintf(&sb, " LIMIT %d", limit+1)
	rows, err := q.QueryContext(ctx, sb.String(), Args(qargs)...)
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
func keyset(cols []string, desc []bool, vals []any, prev bool) (string, []any) {
	var terms []string
	var a []any
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
	return "(" + strings.Join(terms, " OR ") + ")", a
}
