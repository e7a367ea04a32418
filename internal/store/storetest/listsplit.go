package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

// A filter with an "in" list on an indexed field is read one value at a time and merged
// (sqlcore's splitIn): its pages, forwards and backwards, in either order, are those of the same
// filter written so that it is not split.
func testListInvocationsSplit(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		for i := range 23 {
			id := fmt.Sprintf("inv_%02d", 22-i)            // ids against created order: the id breaks ties
			at := t0.Add(time.Duration(i/3) * time.Second) // three by three with the same created_at
			if _, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", at)}, store.Scheduling{}); err != nil {
				return err
			}
			var more []invocation.Event
			if i%3 != 0 {
				more = append(more, ev(id, invocation.EventStarted, "", "", at))
			}
			if i%3 == 2 {
				more = append(more, ev(id, invocation.EventSucceeded, "", `{"result":{"ok":true}}`, at))
			}
			if len(more) > 0 {
				if _, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: more}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	v := invocation.Viewer{TenantID: "acme", All: true}
	query := func(filter, orderBy string) store.ListQuery {
		q := store.ListQuery{Limit: 4}
		var err error
		q.Filter, err = odata.ParseFilter(filter)
		require.NoError(t, err)
		if orderBy != "" {
			q.OrderBy, err = odata.ParseOrderBy(orderBy)
			require.NoError(t, err)
		}
		return q
	}
	// walk follows the next cursors from the first page; with back, it then follows the prev
	// cursors from the last page and returns what those pages held.
	walk := func(filter, orderBy string, back bool) []string {
		q := query(filter, orderBy)
		var ids []string
		var page store.Page[invocation.Record]
		for i := 0; i == 0 || page.HasMore; i++ {
			require.Less(t, i, 20)
			var err error
			page, err = s.ListInvocations(ctx, v, q)
			require.NoError(t, err, filter)
			ids = append(ids, idsOf(page.Items)...)
			q.Cursor = page.NextCursor
		}
		if !back {
			return ids
		}
		ids = idsOf(page.Items)
		for i := 0; page.PrevCursor != ""; i++ {
			require.Less(t, i, 20)
			q.Cursor = page.PrevCursor
			var err error
			page, err = s.ListInvocations(ctx, v, q)
			require.NoError(t, err, filter)
			ids = append(idsOf(page.Items), ids...)
		}
		return ids
	}
	for _, c := range []struct{ split, plain string }{
		{"status in ('queued', 'succeeded')", "not (status ne 'queued' and status ne 'succeeded')"},
		{"status eq 'running' or status eq 'queued'", "not (status ne 'running' and status ne 'queued')"},
		{"mode eq 'async' and status in ('running', 'succeeded', 'failed')", "mode eq 'async' and not (status ne 'running' and status ne 'succeeded')"},
	} {
		for _, order := range []string{"", "created_at asc", "created_at desc,status asc"} {
			want := walk(c.plain, order, false)
			require.NotEmpty(t, want)
			require.Equal(t, want, walk(c.split, order, false), "%s, order %q, forwards", c.split, order)
			require.Equal(t, want, walk(c.split, order, true), "%s, order %q, backwards", c.split, order)
		}
	}
}

func idsOf(rs []invocation.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}
