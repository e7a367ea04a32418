package larkclient

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// ListOptions are the parameters every list takes (docs/api.md §3).
type ListOptions struct {
	// Filter is an OData-style $filter, e.g. "status eq 'active'".
	Filter string
	// OrderBy is a $orderby, e.g. "created_at desc".
	OrderBy string
	// Limit is the page size, 1 to 200; 0 leaves the server's default (25).
	Limit int
	// Cursor continues from a page's PageInfo.NextCursor (or PrevCursor).
	Cursor string
}

func (o ListOptions) values() url.Values {
	q := url.Values{}
	if o.Filter != "" {
		q.Set("$filter", o.Filter)
	}
	if o.OrderBy != "" {
		q.Set("$orderby", o.OrderBy)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// PageInfo is the paging state of a list answer.
type PageInfo struct {
	// NextCursor continues forward; empty when HasMore is false.
	NextCursor string `json:"next_cursor"`
	// PrevCursor goes back one page; empty on a first page.
	PrevCursor string `json:"prev_cursor"`
	// HasMore is true when items follow this page.
	HasMore bool `json:"has_more"`
	// Limit is the page size used.
	Limit int `json:"limit"`
}

// UnmarshalJSON reads null cursors as "".
func (p *PageInfo) UnmarshalJSON(b []byte) error {
	var v struct {
		NextCursor *string `json:"next_cursor"`
		PrevCursor *string `json:"prev_cursor"`
		HasMore    bool    `json:"has_more"`
		Limit      int     `json:"limit"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = PageInfo{HasMore: v.HasMore, Limit: v.Limit}
	if v.NextCursor != nil {
		p.NextCursor = *v.NextCursor
	}
	if v.PrevCursor != nil {
		p.PrevCursor = *v.PrevCursor
	}
	return nil
}

// Page is one page of a list.
type Page[T any] struct {
	// Items are the page's resources, each with its Raw JSON.
	Items []T
	// PageInfo says how to get the next page.
	PageInfo PageInfo
	// JSON is the whole answer as sent.
	JSON json.RawMessage
}

// listPage fetches one page of path with q and decodes its items as T.
func listPage[T any](ctx context.Context, c *Client, path string, q url.Values) (*Page[T], error) {
	res, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q})
	if err != nil {
		return nil, err
	}
	var body struct {
		Items    []json.RawMessage `json:"items"`
		PageInfo PageInfo          `json:"page_info"`
	}
	if err := decode(res.body, &body); err != nil {
		return nil, err
	}
	p := &Page[T]{PageInfo: body.PageInfo, JSON: res.body, Items: make([]T, 0, len(body.Items))}
	for _, raw := range body.Items {
		var it T
		if err := decode(raw, &it); err != nil {
			return nil, err
		}
		p.Items = append(p.Items, it)
	}
	return p, nil
}

// all iterates every item of a list, following next cursors. It stops at the first error, which
// it yields with the zero T.
func all[T any](ctx context.Context, opts ListOptions, page func(context.Context, ListOptions) (*Page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			p, err := page(ctx, opts)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range p.Items {
				if !yield(it, nil) {
					return
				}
			}
			if !p.PageInfo.HasMore || p.PageInfo.NextCursor == "" {
				return
			}
			opts.Cursor = p.PageInfo.NextCursor
		}
	}
}
