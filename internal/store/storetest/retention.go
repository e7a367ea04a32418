package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/tenant"
)

// history builds invocations for the retention tests.
type history struct {
	t *testing.T
	s store.Store
	// seq makes log events' idempotency keys distinct within the case.
	seq *atomic.Int64
}

// newHistory returns a history builder over s with its own log sequence.
func newHistory(t *testing.T, s store.Store) history {
	return history{t: t, s: s, seq: new(atomic.Int64)}
}

// start creates an invocation of tenant at at, running, with a parent when parent != "".
func (h history) start(tenantID, id, parent string, at time.Time) {
	h.t.Helper()
	rec := invocation.Record{ID: id, TenantID: tenantID, EntrypointRef: "ep_1", EntrypointID: fnBase + "vendor.app.billing.tax.v1~",
		EntrypointVersion: "1.0.0", SubjectID: "u1", Mode: invocation.ModeAsync, Params: json.RawMessage(`{"amount":100}`),
		CorrelationID: "corr_1", CreatedAt: at, ParentID: parent}
	data, err := json.Marshal(rec)
	require.NoError(h.t, err)
	update(h.t, h.s, func(tx store.Tx) error {
		if _, err := tx.StartInvocation([]invocation.Event{invocation.Event{InvocationID: id, Type: invocation.EventCreated, Data: data,
			IdempotencyKey: invocation.IdempotencyKey(id, "", 1, invocation.EventCreated, ""), LogicalAttempt: 1, At: at}}, store.Scheduling{}); err != nil {
			return err
		}
		_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{ev(id, invocation.EventStarted, "", "", at)}})
		return err
	})
}

// logs appends n log events of size bytes of data each.
func (h history) logs(tenantID, id string, n, size int, at time.Time) {
	h.t.Helper()
	var evs []invocation.Event
	for range n {
		evs = append(evs, ev(id, invocation.EventLog, fmt.Sprintf("log-%d", h.seq.Add(1)), `"`+strings.Repeat("x", size-2)+`"`, at))
	}
	update(h.t, h.s, func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: evs})
		return err
	})
}

// finish ends an invocation (succeeded) at at.
func (h history) finish(tenantID, id string, at time.Time) {
	h.t.Helper()
	update(h.t, h.s, func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: []invocation.Event{ev(id, invocation.EventSucceeded, "", `{"result":{"ok":true}}`, at)}})
		return err
	})
}

// finished creates an invocation that ran from at and succeeded a minute later, with n log events.
func (h history) finished(tenantID, id string, at time.Time, n int) {
	h.t.Helper()
	h.start(tenantID, id, "", at)
	h.logs(tenantID, id, n, 100, at)
	h.finish(tenantID, id, at.Add(time.Minute))
}

// measure measures and records the tenant's unmeasured history; it returns how many were recorded.
func (h history) measure(tenantID string) int {
	h.t.Helper()
	sizes, err := h.s.MeasureHistory(context.Background(), tenantID, 1000)
	require.NoError(h.t, err)
	var n int
	update(h.t, h.s, func(tx store.Tx) error {
		var err error
		n, err = tx.RecordHistory(tenantID, sizes)
		return err
	})
	return n
}

// purge runs PurgeHistory batches until none is left and returns the batches.
func (h history) purge(tenantID string, p store.HistoryPurge) []store.HistoryPurged {
	h.t.Helper()
	var out []store.HistoryPurged
	for i := 0; ; i++ {
		require.Less(h.t, i, 10000, "PurgeHistory does not end")
		var r store.HistoryPurged
		update(h.t, h.s, func(tx store.Tx) error {
			var err error
			r, err = tx.PurgeHistory(tenantID, p)
			return err
		})
		out = append(out, r)
		if !r.More {
			return out
		}
	}
}

func (h history) bytes(tenantID string) int64 {
	h.t.Helper()
	n, err := h.s.TenantHistoryBytes(context.Background(), tenantID)
	require.NoError(h.t, err)
	return n
}

func (h history) exists(tenantID, id string) bool {
	h.t.Helper()
	_, err := h.s.Invocation(context.Background(), tenantID, id)
	if err == nil {
		return true
	}
	require.ErrorIs(h.t, err, store.ErrNotFound)
	return false
}

// sizeOf computes what MeasureHistory must report: the stored record's JSON plus, per event, its
// type, data, idempotency key and stored timestamp (27 bytes).
func (h history) sizeOf(tenantID, id string) int64 {
	h.t.Helper()
	ctx := context.Background()
	rec, err := h.s.Invocation(ctx, tenantID, id)
	require.NoError(h.t, err)
	doc, err := json.Marshal(rec)
	require.NoError(h.t, err)
	n := int64(len(doc))
	evs, err := h.s.Events(ctx, store.EventLogQuery{TenantID: tenantID, InvocationID: id, AfterSeq: 0, Limit: 100000})
	require.NoError(h.t, err)
	for _, e := range evs {
		n += int64(len(e.Type) + len(e.Data) + len(e.IdempotencyKey) + len("2006-01-02T15:04:05.000000Z"))
	}
	return n
}

func testRetentionMeasure(t *testing.T, s store.Store) {
	ctx := context.Background()
	h := newHistory(t, s)
	h.finished("acme", "inv_done", t0, 3)
	h.start("acme", "inv_running", "", t0)
	h.logs("acme", "inv_running", 2, 50, t0)
	h.finished("globex", "inv_other", t0, 1)

	require.Zero(t, h.bytes("acme"), "nothing is counted before the first measurement")
	sizes, err := s.MeasureHistory(ctx, "acme", 100)
	require.NoError(t, err)
	require.Len(t, sizes, 1, "only finished invocations are measured, only the tenant's: %+v", sizes)
	want := h.sizeOf("acme", "inv_done")
	require.Equal(t, store.HistorySize{InvocationID: "inv_done", LastSeq: 6, Bytes: want, FinishedAt: t0.Add(time.Minute)}, sizes[0])

	update(t, s, func(tx store.Tx) error {
		stale := sizes[0]
		stale.LastSeq = 5
		n, err := tx.RecordHistory("acme", []store.HistorySize{stale, {InvocationID: "inv_gone", LastSeq: 1, Bytes: 10}})
		require.NoError(t, err)
		require.Zero(t, n, "a measurement of an older log position, or of a missing invocation, is not stored")
		n, err = tx.RecordHistory("globex", sizes)
		require.NoError(t, err)
		require.Zero(t, n, "another tenant's invocation is not touched")
		n, err = tx.RecordHistory("acme", sizes)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		return nil
	})
	require.Equal(t, want, h.bytes("acme"))
	require.Zero(t, h.bytes("globex"))
	sizes, err = s.MeasureHistory(ctx, "acme", 100)
	require.NoError(t, err)
	require.Empty(t, sizes, "a measured invocation is not measured again while it does not change")

	// The running one counts once it finishes.
	h.finish("acme", "inv_running", t0.Add(3*time.Minute))
	require.Equal(t, 1, h.measure("acme"))
	require.Equal(t, want+h.sizeOf("acme", "inv_running"), h.bytes("acme"))
	require.Equal(t, 1, h.measure("globex"))
	require.Equal(t, h.sizeOf("globex", "inv_other"), h.bytes("globex"))

	// A failed invocation is retried and fails again with more history: it is measured again when
	// it finishes again; while it runs, its last size stays in the total.
	fail := func(id, step string, at time.Time) {
		update(t, s, func(tx store.Tx) error {
			_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: []invocation.Event{ev(id, invocation.EventFailed, step,
				`{"error":{"error_type_id":"x","message":"m","category":"runtime"}}`, at)}})
			return err
		})
	}
	reopen := func(tenantID string) int64 {
		var n int64
		update(t, s, func(tx store.Tx) error {
			var err error
			n, err = tx.ReopenHistory(tenantID, 100)
			return err
		})
		return n
	}
	h.start("acme", "inv_retry", "", t0)
	fail("inv_retry", "", t0.Add(time.Minute))
	require.Equal(t, 1, h.measure("acme"))
	before, first := h.bytes("acme"), h.sizeOf("acme", "inv_retry")
	require.Zero(t, reopen("acme"), "nothing runs again yet")
	update(t, s, func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_retry", Events: []invocation.Event{
			ev("inv_retry", invocation.EventRequeued, "retry", "", t0.Add(4*time.Minute)),
			ev("inv_retry", invocation.EventStarted, "attempt-2", "", t0.Add(4*time.Minute)),
		}})
		return err
	})
	require.Zero(t, reopen("globex"), "per tenant")
	require.EqualValues(t, 1, reopen("acme"), "the retried invocation is in flight again")
	require.Zero(t, reopen("acme"))
	require.Equal(t, before, h.bytes("acme"), "its last size stays counted while it runs")
	require.Zero(t, h.measure("acme"), "in flight: not measured")
	h.logs("acme", "inv_retry", 2, 500, t0.Add(5*time.Minute))
	fail("inv_retry", "attempt-2", t0.Add(6*time.Minute))
	require.Equal(t, 1, h.measure("acme"), "finished again: measured again")
	require.Greater(t, h.sizeOf("acme", "inv_retry"), first+1000)
	require.Equal(t, before-first+h.sizeOf("acme", "inv_retry"), h.bytes("acme"), "the total moved by the difference")
	sizes, err = s.MeasureHistory(ctx, "acme", 100)
	require.NoError(t, err)
	require.Empty(t, sizes)
}

func testRetentionPurgeAge(t *testing.T, s store.Store) {
	ctx := context.Background()
	h := newHistory(t, s)
	day := 24 * time.Hour
	h.finished("acme", "inv_old", t0, 2)
	h.finished("acme", "inv_new", t0.Add(5*day), 2)
	h.start("acme", "inv_inflight", "", t0) // running since t0: never purged
	h.start("acme", "inv_parent", "", t0)   // a workflow still running ...
	h.start("acme", "inv_child", "inv_parent", t0)
	h.finish("acme", "inv_child", t0.Add(time.Minute)) // ... whose finished child it will read
	h.finished("globex", "inv_globex_old", t0, 1)
	// What points at inv_old goes with it.
	update(t, s, func(tx store.Tx) error {
		require.NoError(t, tx.PutEventWait(events.Wait{InvocationID: "inv_old", Seq: 3, TenantID: "acme", TypeID: evType, Filter: "true", Since: t0}))
		require.NoError(t, tx.PutIdempotencyKey(store.IdempotencyRecord{TenantID: "acme", Scope: "s", Key: "k_old", RequestHash: "h",
			InvocationID: "inv_old", CreatedAt: t0, ExpiresAt: t0.Add(30 * day)}))
		require.NoError(t, tx.PutIdempotencyKey(store.IdempotencyRecord{TenantID: "acme", Scope: "s", Key: "k_new", RequestHash: "h",
			InvocationID: "inv_new", CreatedAt: t0, ExpiresAt: t0.Add(30 * day)}))
		require.NoError(t, tx.PutCachedInvocation(store.CacheEntry{Key: "cache_old", TenantID: "acme", InvocationID: "inv_old", ExpiresAt: t0.Add(30 * day)}))
		require.NoError(t, tx.PutCachedInvocation(store.CacheEntry{Key: "cache_new", TenantID: "acme", InvocationID: "inv_new", ExpiresAt: t0.Add(30 * day)}))
		return nil
	})
	require.Equal(t, 3, h.measure("acme"))
	require.Equal(t, 1, h.measure("globex"))
	oldSize, newSize, childSize := h.sizeOf("acme", "inv_old"), h.sizeOf("acme", "inv_new"), h.sizeOf("acme", "inv_child")
	require.Equal(t, oldSize+newSize+childSize, h.bytes("acme"))

	batches := h.purge("acme", store.HistoryPurge{FinishedBefore: t0.Add(2 * day), MaxRows: 1000})
	require.Len(t, batches, 1)
	require.Equal(t, store.HistoryPurged{Invocations: 1, Rows: 1 + 5, Bytes: oldSize}, batches[0],
		"inv_old: its row and its 5 events (created, started, 2 logs, succeeded)")
	require.False(t, h.exists("acme", "inv_old"))
	_, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_old", AfterSeq: 0, Limit: 100})
	require.ErrorIs(t, err, store.ErrNotFound)
	// Its event log went with it: the same id starts afresh, with nothing of the purged log.
	h.start("acme", "inv_old", "", t0.Add(3*day))
	log, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_old", AfterSeq: 0, Limit: 100})
	require.NoError(t, err)
	require.Len(t, log, 2, "created and started of the new one only")
	for _, id := range []string{"inv_new", "inv_inflight", "inv_parent", "inv_child"} {
		require.True(t, h.exists("acme", id), "%s is kept", id)
	}
	require.True(t, h.exists("globex", "inv_globex_old"), "another tenant's history is not touched")
	require.Equal(t, newSize+childSize, h.bytes("acme"))
	update(t, s, func(tx store.Tx) error {
		waits, err := tx.EventWaits("acme", evType)
		require.NoError(t, err)
		require.Empty(t, waits, "the purged invocation's event waits are gone")
		_, err = tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "k_old", Now: t0})
		require.ErrorIs(t, err, store.ErrNotFound, "its idempotency key is gone")
		_, err = tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "k_new", Now: t0})
		require.NoError(t, err, "a kept invocation's key stays")
		return nil
	})
	_, _, err = s.CachedInvocation(ctx, "cache_old", t0)
	require.ErrorIs(t, err, store.ErrNotFound, "its response-cache entry is gone")
	_, _, err = s.CachedInvocation(ctx, "cache_new", t0)
	require.NoError(t, err)

	// The parent finishes: its child can go now, and the parent once it is old enough.
	h.finish("acme", "inv_parent", t0.Add(time.Hour))
	require.Equal(t, 1, h.measure("acme"))
	batches = h.purge("acme", store.HistoryPurge{FinishedBefore: t0.Add(2 * day), MaxRows: 1000})
	require.EqualValues(t, 2, batches[0].Invocations)
	require.False(t, h.exists("acme", "inv_child"))
	require.False(t, h.exists("acme", "inv_parent"))
	require.True(t, h.exists("acme", "inv_inflight"), "in-flight work is never purged, however old")
	require.Equal(t, newSize, h.bytes("acme"))
	batches = h.purge("acme", store.HistoryPurge{FinishedBefore: t0.Add(2 * day), MaxRows: 1000})
	require.Equal(t, []store.HistoryPurged{{}}, batches, "nothing more to purge")
}

func testRetentionPurgeCap(t *testing.T, s store.Store) {
	h := newHistory(t, s)
	var sizes []int64
	for i := range 6 {
		id := fmt.Sprintf("inv_%d", i)
		h.finished("acme", id, t0.Add(time.Duration(i)*time.Hour), 4)
		sizes = append(sizes, h.sizeOf("acme", id))
	}
	h.start("acme", "inv_running", "", t0)
	h.logs("acme", "inv_running", 50, 1000, t0)
	require.Equal(t, 6, h.measure("acme"))
	var total int64
	for _, n := range sizes {
		total += n
	}
	require.Equal(t, total, h.bytes("acme"))
	// A cap that holds three and a half invocations: the oldest three go, whatever their age.
	cap := sizes[3] + sizes[4] + sizes[5] + sizes[2]/2
	batches := h.purge("acme", store.HistoryPurge{FinishedBefore: t0.Add(-time.Hour), CapBytes: cap, MaxRows: 1000})
	var n int64
	for _, b := range batches {
		n += b.Invocations
	}
	require.EqualValues(t, 3, n)
	for i := range 6 {
		require.Equal(t, i >= 3, h.exists("acme", fmt.Sprintf("inv_%d", i)), "inv_%d: oldest first", i)
	}
	require.True(t, h.exists("acme", "inv_running"))
	require.Equal(t, sizes[3]+sizes[4]+sizes[5], h.bytes("acme"))
	require.LessOrEqual(t, h.bytes("acme"), cap)
	// Within the cap: nothing more goes.
	batches = h.purge("acme", store.HistoryPurge{FinishedBefore: t0.Add(-time.Hour), CapBytes: cap, MaxRows: 1000})
	require.Equal(t, []store.HistoryPurged{{}}, batches)
}

func testRetentionPurgeBatches(t *testing.T, s store.Store) {
	ctx := context.Background()
	h := newHistory(t, s)
	const maxRows = 40
	// 12 small invocations of 5 rows each (the row; created, started, a log, succeeded), and a large
	// one of 1+3+100 = 104 rows.
	for i := range 12 {
		h.finished("acme", fmt.Sprintf("inv_small_%02d", i), t0.Add(time.Duration(i)*time.Minute), 1)
	}
	h.start("acme", "inv_large", "", t0.Add(-time.Hour))
	for range 4 {
		h.logs("acme", "inv_large", 25, 50, t0.Add(-time.Hour))
	}
	h.finish("acme", "inv_large", t0.Add(-time.Hour))
	require.Equal(t, 13, h.measure("acme"))
	largeSize := h.sizeOf("acme", "inv_large")
	var smallTotal int64
	for i := range 12 {
		smallTotal += h.sizeOf("acme", fmt.Sprintf("inv_small_%02d", i))
	}
	require.Equal(t, largeSize+smallTotal, h.bytes("acme"))

	// First batch: the large one is oldest; it is hidden at once and its newest events go.
	var r store.HistoryPurged
	update(t, s, func(tx store.Tx) error {
		var err error
		r, err = tx.PurgeHistory("acme", store.HistoryPurge{FinishedBefore: t0.Add(time.Hour), MaxRows: maxRows})
		return err
	})
	require.Equal(t, store.HistoryPurged{Invocations: 1, Rows: maxRows, Bytes: largeSize, More: true}, r)
	require.Equal(t, smallTotal, h.bytes("acme"), "its history left the total with the first batch")
	require.False(t, h.exists("acme", "inv_large"), "hidden from the first batch on")
	_, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_large", AfterSeq: 0, Limit: 10})
	require.ErrorIs(t, err, store.ErrNotFound, "its timeline is not readable half-deleted")
	page, err := s.ListInvocations(ctx, invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Items, 12)

	batches := append([]store.HistoryPurged{r}, h.purge("acme", store.HistoryPurge{FinishedBefore: t0.Add(time.Hour), MaxRows: maxRows})...)
	var invs, rows int64
	for _, b := range batches {
		require.LessOrEqual(t, b.Rows, int64(maxRows), "every batch is bounded: %+v", batches)
		invs += b.Invocations
		rows += b.Rows
	}
	require.EqualValues(t, 13, invs)
	require.EqualValues(t, 104+12*5, rows, "every row went, once")
	require.Zero(t, h.bytes("acme"))
	page, err = s.ListInvocations(ctx, invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 100})
	require.NoError(t, err)
	require.Empty(t, page.Items)
}

func testRetentionPurgeEvents(t *testing.T, s store.Store) {
	day := 24 * time.Hour
	update(t, s, func(tx store.Tx) error {
		for i := range 5 {
			for _, ten := range []string{"acme", "globex"} {
				if _, _, err := tx.InsertEvent(newEvent(ten, fmt.Sprintf("evt_%d", i), t0.Add(time.Duration(i)*day))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	purge := func(tenantID string, before time.Time, limit int) int64 {
		var n int64
		update(t, s, func(tx store.Tx) error {
			var err error
			n, err = tx.PurgeEvents(tenantID, before, limit)
			return err
		})
		return n
	}
	ids := func(tenantID string) []string {
		page, err := s.ListEvents(context.Background(), tenantID, store.ListQuery{Limit: 100})
		require.NoError(t, err)
		var out []string
		for _, e := range page.Items {
			out = append(out, e.ID)
		}
		return out
	}
	require.EqualValues(t, 1, purge("acme", t0.Add(2*day+time.Second), 1), "limit respected, oldest first")
	require.Equal(t, []string{"evt_1", "evt_2", "evt_3", "evt_4"}, ids("acme"))
	// A workflow waits for events since day 2: they stay even past the window.
	update(t, s, func(tx store.Tx) error {
		return tx.PutEventWait(events.Wait{InvocationID: "inv_w", Seq: 2, TenantID: "acme", TypeID: evType, Filter: "true", Since: t0.Add(2 * day)})
	})
	require.EqualValues(t, 1, purge("acme", t0.Add(4*day), 100))
	require.Equal(t, []string{"evt_2", "evt_3", "evt_4"}, ids("acme"))
	update(t, s, func(tx store.Tx) error { return tx.DeleteEventWaits("acme", "inv_w") })
	require.EqualValues(t, 2, purge("acme", t0.Add(4*day), 100))
	require.Equal(t, []string{"evt_4"}, ids("acme"))
	require.Len(t, ids("globex"), 5, "another tenant's events are not touched")
}

func testRetentionPurgeAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		for i := range 6 {
			for _, ten := range []string{"acme", "globex"} {
				if err := tx.InsertAudit(audit.Event{ID: fmt.Sprintf("aud_%s_%d", ten, i), TenantID: ten, Type: audit.TokenCreated,
					ActorID: "u1", ResourceType: "token", ResourceID: "tok_1", At: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	purge := func(tenantID string, before time.Time, limit int) int64 {
		var n int64
		update(t, s, func(tx store.Tx) error {
			var err error
			n, err = tx.PurgeAudit(tenantID, before, limit)
			return err
		})
		return n
	}
	require.EqualValues(t, 2, purge("acme", t0.Add(3*time.Hour), 2), "limit respected")
	require.EqualValues(t, 1, purge("acme", t0.Add(3*time.Hour), 100))
	page, err := s.ListAudit(ctx, "acme", store.ListQuery{Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Items, 3)
	require.Equal(t, "aud_acme_3", page.Items[0].ID, "the oldest went first; events at the cutoff stay")
	page, err = s.ListAudit(ctx, "globex", store.ListQuery{Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Items, 6, "another tenant's audit log is not touched")
}

func testAllTenants(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, id := range []string{"globex", "acme"} {
			p := tenant.New(id, t0)
			p.Enabled = id == "acme"
			if err := tx.PutTenant(p); err != nil {
				return err
			}
		}
		return nil
	})
	all, err := s.AllTenants(context.Background())
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "acme", all[0].TenantID)
	require.Equal(t, "globex", all[1].TenantID, "disabled tenants are listed too")
	require.Equal(t, int64(90), all[1].Retention.AuditLogDays)
}
