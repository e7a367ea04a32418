package sqlcore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

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

// pageScanner scans a row into the item's destinations followed by the order columns, and keeps
// the page's byte budget: it measures the text and blob columns it scanned and refuses (errPageFull,
// before the item is decoded) a row that would take a non-empty page over budget.
type pageScanner struct {
	rows  *sql.Rows
	extra []any
	// used is the bytes of the rows taken so far; budget the page's limit (0: none).
	used, budget int
	// taken is the number of rows taken so far; full is set when a row was refused.
	taken int
	full  bool
}

// errPageFull is what pageScanner.Scan answers for a row the byte budget leaves to the next page.
var errPageFull = errors.New("the page's byte budget is spent")

// Scan implements Scanner.
func (p *pageScanner) Scan(dest ...any) error {
	if err := p.rows.Scan(append(dest, p.extra...)...); err != nil {
		return err
	}
	n := scannedBytes(dest...)
	if p.budget > 0 && p.taken > 0 && p.used+n > p.budget {
		p.full = true
		return errPageFull
	}
	p.used += n
	return nil
}

// scannedBytes is the size of the text and blob values scanned into dest, a packed document's
// unpacked (UnpackedLen): what a row costs a page's byte budget (numbers and times are not
// counted; they are small and fixed).
func scannedBytes(dest ...any) int {
	n := 0
	for _, d := range dest {
		switch v := d.(type) {
		case *string:
			n += UnpackedLen(*v)
		case *[]byte:
			n += UnpackedLen(*v)
		case *json.RawMessage:
			n += len(*v)
		case *sql.RawBytes:
			n += UnpackedLen([]byte(*v))
		case *sql.NullString:
			n += UnpackedLen(v.String)
		case *any:
			switch x := (*v).(type) {
			case string:
				n += UnpackedLen(x)
			case []byte:
				n += UnpackedLen(x)
			}
		}
	}
	return n
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
// another query is refused (store.ErrBadCursor). Rows are read one at a time and the page ends at
// lq.Limit items or at its byte budget (store.ListQuery.MaxBytes), whichever comes first.
//
// A page of large rows is read in chunks, each continuing after the last row read, sized by the
// bytes of the rows seen so far (this page's, or the last page's of the same table): a driver that
// reads a statement's rows to their end when it is closed early (pgx does) then reads about one
// row past the budget, not every row up to the limit. A page of small rows is one statement.
func ListPage[T any](ctx context.Context, q Querier, spec ListSpec[T], lq store.ListQuery) (store.Page[T], error) {
	var page store.Page[T]
	lp, err := planList(spec, lq)
	if err != nil {
		return page, err
	}
	pr := &pageReader[T]{scan: spec.Scan, ncols: len(lp.cols), limit: lp.limit,
		ps: pageScanner{budget: store.PageBytes(lq.MaxBytes)}}
	after := lp.cur.Values // nil on a first page
	for {
		n := pr.chunk(spec.From)
		ks := keysetOf{cols: lp.cols, desc: lp.desc, cur: cursor{Values: after, Prev: lp.cur.Prev}, resume: after != nil}
		query, args, err := pageQuery(spec, lq.Filter, ks, n-1) // n-1 and the row after it
		if err != nil {
			return page, err
		}
		rows, err := q.QueryContext(ctx, query, Args(args)...)
		if err != nil {
			return page, fmt.Errorf("list %s: %w", spec.From, err)
		}
		got, err := pr.read(rows)
		if err != nil {
			return page, err
		}
		if pr.ended || got < n {
			break // the page is full, or no rows follow
		}
		after = pr.keys[len(pr.keys)-1]
	}
	rowBytes.note(spec.From, pr.ps.used, pr.ps.taken)
	page.Items = pr.items
	return page, setCursors(lp, &page, pr.keys, pr.extra, lq.Cursor != "")
}

// listPlan is a list query's order and limit, with what the page's cursors are made of (its
// statements are pageQuery's).
type listPlan struct {
	cols  []string // the order columns, the unique id last
	desc  []bool
	limit int
	hash  string
	cur   cursor // the cursor the page starts from (zero: the first page)
}

// planList checks lq against spec (a bad filter is reported before a bad order or cursor) and
// compiles its order and cursor.
func planList[T any](spec ListSpec[T], lq store.ListQuery) (listPlan, error) {
	lp := listPlan{limit: min(lq.Limit, store.MaxLimit)}
	if lp.limit <= 0 {
		lp.limit = store.DefaultLimit
	}
	if lq.Filter != nil {
		if _, _, err := odata.Compile(lq.Filter, spec.Fields); err != nil {
			return lp, &store.QueryError{Err: err}
		}
	}
	order := lq.OrderBy
	if len(order) == 0 {
		order = spec.DefaultOrder
	}
	if err := odata.CheckOrderBy(order, spec.Fields); err != nil {
		return lp, &store.QueryError{Err: err}
	}
	for _, o := range order {
		col := spec.Fields[o.Field].Column
		if spec.Nullable[o.Field] {
			col = "coalesce(" + col + ", '')"
		}
		lp.cols = append(lp.cols, col)
		lp.desc = append(lp.desc, o.Desc)
	}
	lp.cols = append(lp.cols, "id")
	lp.desc = append(lp.desc, false)
	lp.hash = queryHash(lq, order)
	if lq.Cursor != "" {
		var err error
		if lp.cur, err = decodeCursor(lq.Cursor); err != nil {
			return lp, err
		}
		if lp.cur.Query != lp.hash || len(lp.cur.Values) != len(lp.cols) {
			return lp, &store.QueryError{Err: fmt.Errorf("cursor does not belong to this query: %w", store.ErrBadCursor)}
		}
	}
	return lp, nil
}

// pageReader reads a page's rows, over one statement or several: up to limit items, and no more
// than the budget's bytes of them (pageScanner) except for the first.
type pageReader[T any] struct {
	scan         func(Scanner) (T, error)
	ncols, limit int
	ps           pageScanner
	items        []T
	keys         [][]any // the items' order-column values, as stored
	// ended is set once the page is complete; extra when rows were left for the next page.
	ended, extra bool
}

// chunk is how many rows the next statement asks for: the rest of the limit and the row after it,
// or, once rows are known to be large, about as many as the rest of the budget holds and one more.
func (pr *pageReader[T]) chunk(from string) int {
	rest := pr.limit + 1 - len(pr.items)
	avg := rowBytes.get(from)
	if pr.ps.taken > 0 {
		avg = pr.ps.used / pr.ps.taken
	}
	if avg <= 0 || pr.ps.budget <= 0 {
		return rest
	}
	return min(rest, max(2, (pr.ps.budget-pr.ps.used)/avg+2))
}

// read reads one statement's rows into the page and closes them; got is how many it returned.
func (pr *pageReader[T]) read(rows *sql.Rows) (got int, err error) {
	defer rows.Close()
	pr.ps.rows = rows
	for rows.Next() {
		got++
		if len(pr.items) == pr.limit {
			pr.ended, pr.extra = true, true // the row beyond the limit: more follow
			return got, nil
		}
		key := make([]any, pr.ncols)
		pr.ps.extra = make([]any, pr.ncols)
		for i := range key {
			pr.ps.extra[i] = &key[i]
		}
		item, err := pr.scan(&pr.ps)
		if pr.ps.full {
			pr.ended, pr.extra = true, true // over the byte budget: this row starts the next page
			return got, nil
		}
		if err != nil {
			return got, err
		}
		for i, v := range key {
			if b, ok := v.([]byte); ok {
				key[i] = string(b)
			}
		}
		pr.ps.taken++
		pr.items = append(pr.items, item)
		pr.keys = append(pr.keys, key)
	}
	return got, rows.Err()
}

// rowSizes remembers the average stored size of the rows of each table's last page, so that the
// next page's first statement does not ask for many more rows than its budget holds.
type rowSizes struct{ m sync.Map } // table → *atomic.Int64

var rowBytes rowSizes

// get is the average size of the rows of from's last page (0: none read yet).
func (r *rowSizes) get(from string) int {
	if v, ok := r.m.Load(from); ok {
		return int(v.(*atomic.Int64).Load())
	}
	return 0
}

// note records the average size of a page's rows: used bytes over taken rows.
func (r *rowSizes) note(from string, used, taken int) {
	if taken == 0 {
		return
	}
	v, _ := r.m.LoadOrStore(from, new(atomic.Int64))
	v.(*atomic.Int64).Store(int64(used / taken))
}

// cursors puts the page's items in order and sets its cursors: extra says that rows beyond the
// page were left (in the direction it was read), resumed that it was read from a cursor.
func setCursors[T any](lp listPlan, page *store.Page[T], keys [][]any, extra, resumed bool) error {
	mark := func(i int, prev bool) (string, error) {
		return encodeCursor(cursor{Values: keys[i], Prev: prev, Query: lp.hash})
	}
	n := len(page.Items)
	var err error
	if lp.cur.Prev {
		// Read backwards from the cursor: put the items in the query's order.
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			page.Items[i], page.Items[j] = page.Items[j], page.Items[i]
			keys[i], keys[j] = keys[j], keys[i]
		}
		page.HasMore = n > 0
		if n == 0 {
			return nil
		}
		if page.NextCursor, err = mark(n-1, false); err != nil || !extra {
			return err
		}
		page.PrevCursor, err = mark(0, true)
		return err
	}
	page.HasMore = extra
	if extra {
		if page.NextCursor, err = mark(n-1, false); err != nil {
			return err
		}
	}
	if resumed && n > 0 {
		page.PrevCursor, err = mark(0, true)
	}
	return err
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
