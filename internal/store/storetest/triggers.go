package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/trigger"
)

func testEventTypes(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(scope, id string) events.Type {
		return events.Type{ID: id, TenantID: scope, Scope: "tenant", Schema: json.RawMessage(`{"type":"object"}`), CreatedAt: t0}
	}
	other := "gts.x.core.events.event.v1~acme.shop.orders.shipped.v1~"
	update(t, s, func(tx store.Tx) error {
		require.NoError(t, tx.InsertEventType(mk("acme", evType)))
		require.NoError(t, tx.InsertEventType(mk(events.PlatformScope, evType)))
		require.NoError(t, tx.InsertEventType(mk(events.PlatformScope, other)))
		require.ErrorIs(t, tx.InsertEventType(mk("acme", evType)), store.ErrConflict)
		// The tenant's type wins over the platform's; the platform's applies to everyone else.
		et, err := tx.EventTypeFor("acme", evType)
		require.NoError(t, err)
		require.Equal(t, "acme", et.TenantID)
		et, err = tx.EventTypeFor("globex", evType)
		require.NoError(t, err)
		require.Equal(t, events.PlatformScope, et.TenantID)
		_, err = tx.EventTypeFor("globex", "gts.x.core.events.event.v1~nobody.x.y.z.v1~")
		require.ErrorIs(t, err, store.ErrNotFound)
		return nil
	})
	_, err := s.EventType(ctx, "globex", evType)
	require.ErrorIs(t, err, store.ErrNotFound)
	page, err := s.ListEventTypes(ctx, "acme", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 3, "the tenant's and the platform's")
	page, err = s.ListEventTypes(ctx, "globex", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	f, err := odata.ParseFilter("scope eq 'tenant'")
	require.NoError(t, err)
	page, err = s.ListEventTypes(ctx, "acme", store.ListQuery{Filter: f, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	page, err = s.ListEventTypes(ctx, "acme", store.ListQuery{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	next, err := s.ListEventTypes(ctx, "acme", store.ListQuery{Limit: 2, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, next.Items, 1)
	require.Error(t, s.Update(ctx, func(tx store.Tx) error { return tx.DeleteEventType("globex", evType) }))
	update(t, s, func(tx store.Tx) error { return tx.DeleteEventType("acme", evType) })
	_, err = s.EventType(ctx, "acme", evType)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func newTrigger(tenant, id string) *trigger.Trigger {
	return &trigger.Trigger{ID: id, TenantID: tenant, EventTypeID: evType, EntrypointID: "ep", Status: trigger.StatusActive,
		ExecutionContext: trigger.ContextSystem, DeadLetterQueue: trigger.DeadLetterQueue{Enabled: true}, CreatedAt: t0, UpdatedAt: t0}
}

func testTriggers(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		for _, tr := range []*trigger.Trigger{newTrigger("acme", "a"), newTrigger("acme", "b"), newTrigger("globex", "a")} {
			require.NoError(t, tx.InsertTrigger(tr))
			require.EqualValues(t, 1, tr.Revision)
		}
		off := newTrigger("acme", "off")
		off.Status = trigger.StatusDisabled
		require.NoError(t, tx.InsertTrigger(off))
		require.ErrorIs(t, tx.InsertTrigger(newTrigger("acme", "a")), store.ErrConflict)
		active, err := tx.ActiveTriggers("acme", evType)
		require.NoError(t, err)
		require.Len(t, active, 2, "active ones of the tenant only")
		n, err := tx.CountTenantTriggers("acme")
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
		return nil
	})
	tr, err := s.Trigger(ctx, "acme", "a")
	require.NoError(t, err)
	tr.EventFilterQuery = "payload.x == 1"
	update(t, s, func(tx store.Tx) error { return tx.UpdateTrigger(&tr) })
	require.EqualValues(t, 2, tr.Revision)
	stale := tr
	stale.Revision = 1
	require.ErrorIs(t, s.Update(ctx, func(tx store.Tx) error { return tx.UpdateTrigger(&stale) }), store.ErrStale)
	got, err := s.Trigger(ctx, "acme", "a")
	require.NoError(t, err)
	require.Equal(t, "payload.x == 1", got.EventFilterQuery)
	_, err = s.Trigger(ctx, "globex", "b")
	require.ErrorIs(t, err, store.ErrNotFound)
	page, err := s.ListTriggers(ctx, "acme", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 3)
	f, err := odata.ParseFilter("status eq 'active' and trigger_id eq 'b'")
	require.NoError(t, err)
	page, err = s.ListTriggers(ctx, "acme", store.ListQuery{Filter: f, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	n, err := s.CountTenantTriggers(ctx, "globex")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	// Batch due times: only the ones set, earliest first, across tenants; SetBatchDue leaves the
	// revision alone.
	update(t, s, func(tx store.Tx) error {
		require.NoError(t, tx.SetBatchDue("acme", "b", at(2*time.Minute)))
		return tx.SetBatchDue("globex", "a", at(time.Minute))
	})
	due, err := s.DueBatches(ctx, t0.Add(90*time.Second), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, "globex", due[0].TenantID)
	next, err := s.NextBatchDue(ctx)
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Minute), *next)
	b, err := s.Trigger(ctx, "acme", "b")
	require.NoError(t, err)
	require.EqualValues(t, 1, b.Revision)
	require.Equal(t, t0.Add(2*time.Minute), *b.BatchDueAt)

	update(t, s, func(tx store.Tx) error { return tx.DeleteTrigger("acme", "a") })
	_, err = s.Trigger(ctx, "acme", "a")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.Update(ctx, func(tx store.Tx) error { return tx.DeleteTrigger("acme", "a") }), store.ErrNotFound)
}

func testTriggerMatching(t *testing.T, s store.Store) {
	ctx := context.Background()
	var evs []events.Event
	update(t, s, func(tx store.Tx) error {
		require.NoError(t, tx.InsertTrigger(newTrigger("acme", "a")))
		for i, id := range []string{"e1", "e2", "e3"} {
			ev, _, err := tx.InsertEvent(newEvent("acme", id, t0.Add(time.Duration(i)*time.Second)))
			require.NoError(t, err)
			evs = append(evs, ev)
		}
		return nil
	})
	// Starts: unique per trigger and first event; ended once.
	start := trigger.Start{TenantID: "acme", InvocationID: "inv1", TriggerID: "a", EventSeqs: []int64{evs[0].Seq},
		EventIDs: []string{"e1"}, ReceivedAt: t0, StartedAt: t0, Params: json.RawMessage(`{"event":{}}`)}
	update(t, s, func(tx store.Tx) error { return tx.InsertTriggerStart(start) })
	dup := start
	dup.InvocationID = "inv2"
	require.ErrorIs(t, s.Update(ctx, func(tx store.Tx) error { return tx.InsertTriggerStart(dup) }), store.ErrConflict)
	redrive := dup
	redrive.Redrive = true
	update(t, s, func(tx store.Tx) error { return tx.InsertTriggerStart(redrive) })
	update(t, s, func(tx store.Tx) error {
		got, err := tx.TriggerStart("acme", "inv1")
		require.NoError(t, err)
		require.Equal(t, []string{"e1"}, got.EventIDs)
		require.JSONEq(t, `{"event":{}}`, string(got.Params))
		_, err = tx.TriggerStart("globex", "inv1")
		require.ErrorIs(t, err, store.ErrNotFound)
		_, ended, err := tx.EndTriggerStart("acme", "inv1", t0.Add(time.Minute))
		require.NoError(t, err)
		require.True(t, ended)
		_, ended, err = tx.EndTriggerStart("acme", "inv1", t0.Add(time.Minute))
		require.NoError(t, err)
		require.False(t, ended, "ended once")
		_, _, err = tx.EndTriggerStart("acme", "nope", t0)
		require.ErrorIs(t, err, store.ErrNotFound)
		return nil
	})
	// Pending batches: in arrival order, bounded, removed up to a seq.
	update(t, s, func(tx store.Tx) error {
		for _, ev := range []events.Event{evs[2], evs[0], evs[1]} {
			require.NoError(t, tx.AddPending("acme", "a", ev))
		}
		require.ErrorIs(t, tx.AddPending("acme", "a", evs[0]), store.ErrConflict)
		n, err := tx.CountPending("acme", "a")
		require.NoError(t, err)
		require.Equal(t, 3, n)
		batch, err := tx.PendingBatch("acme", "a", 2)
		require.NoError(t, err)
		require.Equal(t, []string{"e1", "e2"}, []string{batch[0].ID, batch[1].ID})
		require.NoError(t, tx.RemovePending("acme", "a", batch[1].Seq))
		batch, err = tx.PendingBatch("acme", "a", 10)
		require.NoError(t, err)
		require.Len(t, batch, 1)
		require.Equal(t, "e3", batch[0].ID)
		n, err = tx.CountPending("globex", "a")
		require.NoError(t, err)
		require.Zero(t, n)
		return nil
	})
}

func testTriggerDeadLetters(t *testing.T, s store.Store) {
	ctx := context.Background()
	dl := func(id, inv string, at time.Duration) trigger.DeadLetter {
		return trigger.DeadLetter{ID: id, TenantID: "acme", TriggerID: "a", EventIDs: []string{"e-" + id}, InvocationID: inv,
			Params: json.RawMessage(`{}`), CreatedAt: t0.Add(at)}
	}
	update(t, s, func(tx store.Tx) error {
		require.NoError(t, tx.InsertTrigger(newTrigger("acme", "a")))
		require.NoError(t, tx.InsertDeadLetter(dl("d3", "inv3", 3*time.Second)))
		require.NoError(t, tx.InsertDeadLetter(dl("d1", "inv1", time.Second)))
		require.NoError(t, tx.InsertDeadLetter(dl("d2", "inv2", 2*time.Second)))
		require.NoError(t, tx.InsertDeadLetter(dl("d4", "", 4*time.Second)))
		require.NoError(t, tx.InsertDeadLetter(dl("d5", "", 5*time.Second)), "letters without an invocation do not collide")
		require.ErrorIs(t, tx.InsertDeadLetter(dl("dx", "inv1", time.Second)), store.ErrConflict, "one per invocation")
		got, err := tx.DeadLetter("acme", "a", "d2")
		require.NoError(t, err)
		require.Equal(t, "inv2", got.InvocationID)
		return nil
	})
	page, err := s.DeadLetters(ctx, "acme", "a", store.ListQuery{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"d1", "d2"}, []string{page.Items[0].ID, page.Items[1].ID})
	page, err = s.DeadLetters(ctx, "acme", "a", store.ListQuery{Limit: 10, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, page.Items, 3)
	page, err = s.DeadLetters(ctx, "globex", "a", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Items)
	update(t, s, func(tx store.Tx) error {
		taken, err := tx.TakeDeadLetters("acme", "a", []string{"d3", "nope"}, 10)
		require.NoError(t, err)
		require.Len(t, taken, 1)
		require.Equal(t, "d3", taken[0].ID)
		taken, err = tx.TakeDeadLetters("acme", "a", nil, 2)
		require.NoError(t, err)
		require.Equal(t, []string{"d1", "d2"}, []string{taken[0].ID, taken[1].ID}, "oldest first")
		taken, err = tx.TakeDeadLetters("acme", "a", []string{}, 10)
		require.NoError(t, err)
		require.Empty(t, taken)
		return nil
	})
	page, err = s.DeadLetters(ctx, "acme", "a", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	// Deleting the trigger deletes its dead letters.
	update(t, s, func(tx store.Tx) error { return tx.DeleteTrigger("acme", "a") })
	page, err = s.DeadLetters(ctx, "acme", "a", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Items)
}

func testTriggerMetrics(t *testing.T, s store.Store) {
	ctx := context.Background()
	add := func(at time.Duration, c trigger.Counters, latency int64) {
		update(t, s, func(tx store.Tx) error {
			return tx.AddTriggerMetrics(trigger.MetricsDelta{TenantID: "acme", TriggerID: "a", Hour: t0.Add(at), Counters: c, LatencyMS: latency})
		})
	}
	add(0, trigger.Counters{Received: 2, FilteredOut: 1}, -1)
	add(10*time.Minute, trigger.Counters{Triggered: 1, Succeeded: 1}, 7)
	add(20*time.Minute, trigger.Counters{Failed: 1, DeadLettered: 1}, 70000)
	add(2*time.Hour, trigger.Counters{Received: 5}, -1)
	rows, err := s.TriggerMetrics(ctx, "acme", "a", t0)
	require.NoError(t, err)
	require.Len(t, rows, 2, "one row per hour")
	require.Equal(t, t0.Truncate(time.Hour), rows[0].Hour)
	require.Equal(t, trigger.Counters{Received: 2, FilteredOut: 1, Triggered: 1, Succeeded: 1, Failed: 1, DeadLettered: 1}, rows[0].Counters)
	require.Len(t, rows[0].Latency, len(trigger.LatencyBounds)+1)
	var n int64
	for _, c := range rows[0].Latency {
		n += c
	}
	require.EqualValues(t, 2, n)
	require.EqualValues(t, 1, rows[0].Latency[3], "7 ms falls in the (5, 10] bucket")
	require.EqualValues(t, 5, rows[1].Received)
	rows, err = s.TriggerMetrics(ctx, "acme", "a", t0.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, rows, 1)
	rows, err = s.TriggerMetrics(ctx, "globex", "a", t0)
	require.NoError(t, err)
	require.Empty(t, rows)
}

func testTriggerHistoryPurge(t *testing.T, s store.Store) {
	ctx := context.Background()
	start := func(inv string, seq int64) trigger.Start {
		return trigger.Start{TenantID: "acme", InvocationID: inv, TriggerID: "a", EventSeqs: []int64{seq}, EventIDs: []string{"e"},
			ReceivedAt: t0, StartedAt: t0, Params: json.RawMessage(`{}`)}
	}
	update(t, s, func(tx store.Tx) error {
		require.NoError(t, tx.InsertTrigger(newTrigger("acme", "a")))
		for i, inv := range []string{"old1", "old2", "new", "open"} {
			require.NoError(t, tx.InsertTriggerStart(start(inv, int64(i+1))))
		}
		for _, inv := range []string{"old1", "old2"} {
			if _, _, err := tx.EndTriggerStart("acme", inv, t0); err != nil {
				return err
			}
		}
		if _, _, err := tx.EndTriggerStart("acme", "new", t0.Add(48*time.Hour)); err != nil {
			return err
		}
		for _, h := range []time.Duration{0, time.Hour, 72 * time.Hour} {
			d := trigger.MetricsDelta{TenantID: "acme", TriggerID: "a", Hour: t0.Add(h), LatencyMS: -1}
			d.Received = 1
			require.NoError(t, tx.AddTriggerMetrics(d))
		}
		return nil
	})
	q := store.TriggerHistoryPurge{TenantID: "acme", StartsBefore: t0.Add(24 * time.Hour), MetricsBefore: t0.Add(24 * time.Hour), Limit: 3}
	var n int64
	update(t, s, func(tx store.Tx) (err error) { n, err = tx.PurgeTriggerHistory(q); return err })
	require.EqualValues(t, 3, n, "two ended starts, then one metrics row: the batch is bounded")
	update(t, s, func(tx store.Tx) (err error) { n, err = tx.PurgeTriggerHistory(q); return err })
	require.EqualValues(t, 1, n)
	update(t, s, func(tx store.Tx) (err error) { n, err = tx.PurgeTriggerHistory(q); return err })
	require.Zero(t, n)
	update(t, s, func(tx store.Tx) error {
		for inv, kept := range map[string]bool{"old1": false, "old2": false, "new": true, "open": true} {
			_, err := tx.TriggerStart("acme", inv)
			if kept {
				require.NoError(t, err, inv)
			} else {
				require.ErrorIs(t, err, store.ErrNotFound, inv)
			}
		}
		return nil
	})
	rows, err := s.TriggerMetrics(ctx, "acme", "a", t0.Add(-time.Hour))
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, t0.Add(72*time.Hour).Truncate(time.Hour), rows[0].Hour)
}
