package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
)

const evType = "gts.x.core.events.event.v1~acme.shop.orders.paid.v1~"

func newEvent(tenant, id string, at time.Time) events.Event {
	return events.Event{ID: id, TenantID: tenant, TypeID: evType, Payload: json.RawMessage(`{"order_id":"o1"}`),
		Source: "shop", ReceivedAt: at, PublishedBy: "u1"}
}

func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	var first events.Event
	update(t, s, func(tx store.Tx) error {
		var inserted bool
		var err error
		first, inserted, err = tx.InsertEvent(newEvent("acme", "evt_1", t0))
		require.NoError(t, err)
		require.True(t, inserted)
		require.Positive(t, first.Seq)
		dup := newEvent("acme", "evt_1", t0.Add(time.Minute))
		dup.Payload = json.RawMessage(`{"order_id":"other"}`)
		got, inserted, err := tx.InsertEvent(dup)
		require.NoError(t, err)
		require.False(t, inserted, "a repeated event id is not stored twice")
		require.JSONEq(t, `{"order_id":"o1"}`, string(got.Payload), "the first event is kept")
		require.Equal(t, first.Seq, got.Seq)
		_, inserted, err = tx.InsertEvent(newEvent("globex", "evt_1", t0))
		require.NoError(t, err)
		require.True(t, inserted, "event ids are per tenant")
		for i := 2; i <= 4; i++ {
			_, _, err := tx.InsertEvent(newEvent("acme", fmt.Sprintf("evt_%d", i), t0.Add(time.Duration(i)*time.Second)))
			require.NoError(t, err)
		}
		other := newEvent("acme", "evt_other", t0.Add(3*time.Second))
		other.TypeID = "gts.x.core.events.event.v1~acme.shop.orders.shipped.v1~"
		_, _, err = tx.InsertEvent(other)
		require.NoError(t, err)

		since, err := tx.EventsSince(store.EventsSinceQuery{TenantID: "acme", TypeID: evType, Since: t0.Add(2 * time.Second), AfterSeq: 0, UnconsumedBy: "", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"evt_2", "evt_3", "evt_4"}, eventIDs(since), "received at or after since, this type only, in order")
		page, err := tx.EventsSince(store.EventsSinceQuery{TenantID: "acme", TypeID: evType, Since: t0, AfterSeq: since[0].Seq, UnconsumedBy: "", Limit: 1})
		require.NoError(t, err)
		require.Equal(t, []string{"evt_3"}, eventIDs(page), "afterSeq and limit page through")
		none, err := tx.EventsSince(store.EventsSinceQuery{TenantID: "initech", TypeID: evType, Since: t0, AfterSeq: 0, UnconsumedBy: "", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, none)

		fresh, err := tx.ConsumeEvent("acme", "inv_a", since[1].Seq)
		require.NoError(t, err)
		require.True(t, fresh)
		fresh, err = tx.ConsumeEvent("acme", "inv_a", since[1].Seq)
		require.NoError(t, err)
		require.False(t, fresh, "an invocation consumes an event once")
		left, err := tx.EventsSince(store.EventsSinceQuery{TenantID: "acme", TypeID: evType, Since: t0.Add(2 * time.Second), AfterSeq: 0, UnconsumedBy: "inv_a", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"evt_2", "evt_4"}, eventIDs(left), "the events inv_a consumed are left out for it")
		others, err := tx.EventsSince(store.EventsSinceQuery{TenantID: "acme", TypeID: evType, Since: t0.Add(2 * time.Second), AfterSeq: 0, UnconsumedBy: "inv_b", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"evt_2", "evt_3", "evt_4"}, eventIDs(others), "and only for it")
		return nil
	})
	got, err := s.Event(ctx, "acme", "evt_1")
	require.NoError(t, err)
	require.Equal(t, first.Seq, got.Seq)
	require.Equal(t, "shop", got.Source)
	require.True(t, got.ReceivedAt.Equal(t0))
	_, err = s.Event(ctx, "initech", "evt_1")
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant's event is not found")

	f, err := odata.ParseFilter("event_type_id eq '" + evType + "'")
	require.NoError(t, err)
	list, err := s.ListEvents(ctx, "acme", store.ListQuery{Filter: f, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"evt_1", "evt_2"}, eventIDs(list.Items))
	require.True(t, list.HasMore)
	next, err := s.ListEvents(ctx, "acme", store.ListQuery{Filter: f, Limit: 2, Cursor: list.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{"evt_3", "evt_4"}, eventIDs(next.Items))
}

func eventIDs(es []events.Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func testEventWaits(t *testing.T, s store.Store) {
	timeout := t0.Add(time.Hour)
	update(t, s, func(tx store.Tx) error {
		require.NoError(t, tx.PutEventWait(events.Wait{TenantID: "acme", InvocationID: "inv_b", Seq: 3, TypeID: evType, Filter: "payload.x > 1", Since: t0.Add(time.Second)}))
		require.NoError(t, tx.PutEventWait(events.Wait{TenantID: "acme", InvocationID: "inv_a", Seq: 1, TypeID: evType, Since: t0, TimeoutAt: &timeout}))
		require.NoError(t, tx.PutEventWait(events.Wait{TenantID: "globex", InvocationID: "inv_g", Seq: 0, TypeID: evType, Since: t0}))
		ws, err := tx.EventWaits("acme", evType)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		require.Equal(t, "inv_a", ws[0].InvocationID, "oldest first")
		require.True(t, ws[0].TimeoutAt.Equal(timeout))
		require.Equal(t, events.Wait{TenantID: "acme", InvocationID: "inv_b", Seq: 3, TypeID: evType, Filter: "payload.x > 1", Since: t0.Add(time.Second)}, ws[1])
		// Replacing the wait at the same position.
		require.NoError(t, tx.PutEventWait(events.Wait{TenantID: "acme", InvocationID: "inv_b", Seq: 3, TypeID: evType, Since: t0.Add(2 * time.Second)}))
		ws, err = tx.EventWaits("acme", evType)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		require.Equal(t, "", ws[1].Filter)
		require.NoError(t, tx.DeleteEventWaits("acme", "inv_a"))
		require.NoError(t, tx.DeleteEventWaits("acme", "inv_g"), "another tenant's waits are untouched")
		ws, err = tx.EventWaits("acme", evType)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		ws, err = tx.EventWaits("globex", evType)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		return nil
	})
}

// testListByteBudget: a page ends before the item that would take it over ListQuery.MaxBytes, an
// item bigger than the budget comes alone, and the cursors still reach every item exactly once,
// forwards and backwards (ListPage's chunked reads included: the sizes vary along the list).
func testListByteBudget(t *testing.T, s store.Store) {
	ctx := context.Background()
	const budget = 4096
	sizes := []int{100, 100, 1500, 1500, 1500, 1500, 9000, 100, 100, 100, 100, 100, 100, 2000, 2000, 2000, 100}
	update(t, s, func(tx store.Tx) error {
		for i, n := range sizes {
			e := newEvent("acme", fmt.Sprintf("evt_%02d", i), t0.Add(time.Duration(i)*time.Second))
			e.Payload = json.RawMessage(`{"pad":"` + strings.Repeat("p", n) + `"}`)
			_, _, err := tx.InsertEvent(e)
			require.NoError(t, err)
		}
		return nil
	})
	all, err := s.ListEvents(ctx, "acme", store.ListQuery{Limit: 200, MaxBytes: 1 << 30})
	require.NoError(t, err)
	require.Len(t, all.Items, len(sizes))
	require.False(t, all.HasMore)

	var pages [][]events.Event
	q := store.ListQuery{Limit: 200, MaxBytes: budget}
	var prevCursor string
	for {
		require.Less(t, len(pages), 100, "pagination does not end")
		page, err := s.ListEvents(ctx, "acme", q)
		require.NoError(t, err)
		require.NotEmpty(t, page.Items)
		total := 0
		for _, e := range page.Items {
			total += len(e.Payload)
		}
		if len(page.Items) > 1 {
			require.LessOrEqual(t, total, budget, "a page of %d items holds %d payload bytes", len(page.Items), total)
		}
		pages = append(pages, page.Items)
		prevCursor = page.PrevCursor
		require.Equal(t, page.HasMore, page.NextCursor != "")
		if !page.HasMore {
			break
		}
		q.Cursor = page.NextCursor
	}
	var forward []string
	for _, p := range pages {
		forward = append(forward, eventIDs(p)...)
		if len(p) == 1 {
			continue
		}
		for _, e := range p {
			require.Less(t, len(e.Payload), budget, "an item bigger than the budget comes alone")
		}
	}
	require.Equal(t, eventIDs(all.Items), forward, "every item exactly once, in order")
	require.Greater(t, len(pages), 4, "the budget ends pages early")

	backward := eventIDs(pages[len(pages)-1])
	for cursor := prevCursor; cursor != ""; {
		page, err := s.ListEvents(ctx, "acme", store.ListQuery{Limit: 200, MaxBytes: budget, Cursor: cursor})
		require.NoError(t, err)
		require.NotEmpty(t, page.Items)
		backward = append(eventIDs(page.Items), backward...)
		cursor = page.PrevCursor
	}
	require.Equal(t, forward, backward, "walking back with prev_cursor reaches every item exactly once")

	few, err := s.ListEvents(ctx, "acme", store.ListQuery{Limit: 3, MaxBytes: 1 << 30})
	require.NoError(t, err)
	require.Len(t, few.Items, 3, "limit still bounds the count")
	require.True(t, few.HasMore)
}
