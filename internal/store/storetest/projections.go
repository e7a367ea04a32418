package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/projection"
	"github.com/larkrun/lark/internal/store"
)

// genHistory appends a random, valid history to a new invocation through StartInvocation and
// Append in random batches, as the engine would: status changes the status machine allows,
// informational events, closing events with metrics and cost, engine attempts that move, replayed
// idempotency keys, timestamps over several hours (some out of order, which the store raises).
func genHistory(t *testing.T, s store.Store, rng *rand.Rand, tenantID, id, ep string, at time.Time) {
	t.Helper()
	created := usageCreated(id, tenantID, ep, float64(rng.IntN(5))/1000, at)
	var events []invocation.Event
	first1 := created
	first1.Seq = 1
	r, err := invocation.Apply(invocation.Record{}, first1)
	require.NoError(t, err)
	types := []invocation.EventType{
		invocation.EventStarted, invocation.EventSucceeded, invocation.EventFailed, invocation.EventCanceled,
		invocation.EventSuspended, invocation.EventResumed, invocation.EventRetryScheduled, invocation.EventRequeued,
		invocation.EventDeadLettered, invocation.EventCompensationStarted, invocation.EventCompensationCompleted,
		invocation.EventCompensationFailed, invocation.EventStepStarted, invocation.EventStepCompleted, invocation.EventLog,
		invocation.EventJournal, invocation.EventJournalResolved, invocation.EventSignalReceived, invocation.EventReclaimed,
		invocation.EventLateResult, invocation.EventContinuedAsNew,
	}
	engine := 1
	n := 3 + rng.IntN(25)
	var sent []invocation.Event // what is handed to the store: events plus replays of earlier ones
	firstReplay := -1
	for i := 0; len(events) < n && i < 200; i++ {
		if len(sent) > 0 && rng.IntN(10) == 0 {
			// A replay of an event already handed over (same idempotency key): the store skips it.
			if firstReplay < 0 {
				firstReplay = len(sent)
			}
			sent = append(sent, sent[rng.IntN(len(sent))])
			continue
		}
		typ := types[rng.IntN(len(types))]
		at = at.Add(time.Duration(rng.IntN(40)-5) * time.Minute)
		if typ == invocation.EventReclaimed {
			engine++
		}
		e := invocation.Event{InvocationID: id, Type: typ, At: at, EngineAttempt: engine, LogicalAttempt: r.Attempt,
			IdempotencyKey: fmt.Sprintf("k%d-%d", i, rng.IntN(1<<30))}
		switch typ {
		case invocation.EventSucceeded, invocation.EventFailed, invocation.EventRetryScheduled, invocation.EventSuspended,
			invocation.EventLateResult:
			billed, cpu, egress, mem := int64(rng.IntN(5000)), int64(rng.IntN(900)), int64(rng.IntN(1<<16)), int64(128)
			o := map[string]any{"metrics": invocation.Metrics{DurationMS: &billed, BilledDurationMS: &billed, CPUTimeMS: &cpu,
				MemoryLimitMB: &mem, EgressBytes: &egress}, "cost": float64(rng.IntN(1000)) / 7e6}
			switch typ {
			case invocation.EventSucceeded:
				o["result"] = map[string]any{"n": i}
			case invocation.EventFailed:
				o["error"] = invocation.Error{TypeID: "gts.x.core.serverless.err.v1~x.core.serverless.err.runtime.v1~", Message: "boom", Category: "runtime"}
			case invocation.EventSuspended:
				o["reason"] = []string{"timer", "step retry", "child ended", "event order.paid"}[rng.IntN(4)]
			}
			e.Data, err = json.Marshal(o)
			require.NoError(t, err)
		case invocation.EventJournalResolved:
			e.Data = json.RawMessage([]string{`{"event_id":"ev1"}`, `{"child_invocation_id":"c1"}`, `{}`}[rng.IntN(3)])
		case invocation.EventSignalReceived:
			e.Data = json.RawMessage(`{"action":"resume"}`)
		}
		e.Seq = r.LastSeq + 1
		next, err := invocation.Apply(r, e)
		if err != nil {
			continue // not allowed in this status: draw again
		}
		r = next
		e.Seq = 0
		events = append(events, e)
		sent = append(sent, e)
	}
	first := rng.IntN(len(sent) + 1)
	if firstReplay >= 0 && first > firstReplay {
		first = firstReplay // StartInvocation takes new events only
	}
	update(t, s, func(tx store.Tx) error {
		_, err := tx.StartInvocation(append([]invocation.Event{created}, slices.Clone(sent[:first])...), store.Scheduling{})
		return err
	})
	for rest := sent[first:]; len(rest) > 0; {
		k := 1 + rng.IntN(len(rest))
		batch := slices.Clone(rest[:k])
		rest = rest[k:]
		update(t, s, func(tx store.Tx) error {
			_, _, err := tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: batch})
			return err
		})
	}
}

// verifyAll runs projection.Verify over the whole store and returns the differences.
func verifyAll(t *testing.T, s store.Store, now time.Time) ([]projection.Diff, projection.Summary) {
	t.Helper()
	var diffs []projection.Diff
	sum, err := projection.Verify(context.Background(), s, projection.Options{Now: now, PageSize: 7},
		func(d projection.Diff) error { diffs = append(diffs, d); return nil })
	require.NoError(t, err)
	return diffs, sum
}

// testProjectionsAgree: the projections the write path stores (StartInvocation, Append) are the
// fold of the log (projection.Verify finds nothing) on many generated histories, in two tenants,
// over several hours; Invocation equals invocation.Rebuild of Events.
func testProjectionsAgree(t *testing.T, s store.Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	const epA, epB = fnBase + "vendor.app.billing.a.v1~", fnBase + "vendor.app.billing.b.v1~"
	n := 0
	for i := range 40 {
		tenantID := []string{"acme", "beta"}[i%2]
		ep := []string{epA, epB}[rng.IntN(2)]
		genHistory(t, s, rng, tenantID, fmt.Sprintf("inv_%03d", i), ep, t0.Add(time.Duration(rng.IntN(300))*time.Minute))
		n++
	}
	diffs, sum := verifyAll(t, s, t0.Add(48*time.Hour))
	require.Empty(t, diffs)
	require.EqualValues(t, n, sum.Invocations)
	require.NotZero(t, sum.UsageRows)

	for i := range n {
		id, tenantID := fmt.Sprintf("inv_%03d", i), []string{"acme", "beta"}[i%2]
		rec, err := s.Invocation(ctx, tenantID, id)
		require.NoError(t, err)
		events, err := s.Events(ctx, store.EventLogQuery{TenantID: tenantID, InvocationID: id, Limit: 10000})
		require.NoError(t, err)
		want, err := invocation.Rebuild(events)
		require.NoError(t, err)
		require.Equal(t, want, rec, "invocation %s", id)
	}
}

// testProjectionReads: InvocationTenants lists the tenants with invocations; StoredInvocations
// pages a tenant's by (created_at, id) with the updated_at filter and returns the stored columns;
// InvocationLog pages a log without its projection.
func testProjectionReads(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i, x := range []struct{ tenant, id string }{{"beta", "inv_b1"}, {"acme", "inv_a2"}, {"acme", "inv_a1"}} {
		update(t, s, func(tx store.Tx) error {
			_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(x.id, x.tenant, "ep_1", t0.Add(time.Duration(i)*time.Hour)),
				ev(x.id, invocation.EventStarted, "", "", t0.Add(time.Duration(i)*time.Hour+time.Minute))}, store.Scheduling{})
			return err
		})
	}
	tenants, err := s.InvocationTenants(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"acme", "beta"}, tenants)

	var got []string
	q := store.StoredInvocationQuery{TenantID: "acme", Limit: 1}
	for {
		page, err := s.StoredInvocations(ctx, q)
		require.NoError(t, err)
		for _, si := range page {
			got = append(got, si.ID)
		}
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].Cursor
	}
	require.Equal(t, []string{"inv_a2", "inv_a1"}, got, "by created_at, then id")
	_, err = s.StoredInvocations(ctx, store.StoredInvocationQuery{TenantID: "acme", After: "not a cursor"})
	require.ErrorIs(t, err, store.ErrBadCursor)

	page, err := s.StoredInvocations(ctx, store.StoredInvocationQuery{TenantID: "acme"})
	require.NoError(t, err)
	require.Len(t, page, 2)
	si := page[0]
	require.Equal(t, "inv_a2", si.ID)
	require.Equal(t, invocation.StatusRunning, si.Status)
	require.Equal(t, "ep_1", si.EntrypointRef)
	require.Equal(t, invocation.ModeAsync, si.Mode)
	require.Equal(t, "corr_1", si.CorrelationID)
	require.Equal(t, "u1", si.SubjectID)
	require.EqualValues(t, 2, si.LastSeq)
	require.True(t, si.CreatedAt.Equal(t0.Add(time.Hour).Truncate(time.Microsecond)), "%v", si.CreatedAt)
	require.True(t, si.UpdatedAt.Equal(t0.Add(time.Hour+time.Minute).Truncate(time.Microsecond)), "%v", si.UpdatedAt)
	var rec invocation.Record
	require.NoError(t, json.Unmarshal(si.Record, &rec))
	require.Equal(t, "inv_a2", rec.ID)

	page, err = s.StoredInvocations(ctx, store.StoredInvocationQuery{TenantID: "acme", UpdatedSince: t0.Add(time.Hour + time.Minute)})
	require.NoError(t, err)
	require.Len(t, page, 2, "updated at or after the bound: inv_a2 (at it) and inv_a1")
	page, err = s.StoredInvocations(ctx, store.StoredInvocationQuery{TenantID: "acme", UpdatedSince: t0.Add(time.Hour + 2*time.Minute)})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "inv_a1", page[0].ID)

	events, err := s.InvocationLog(ctx, store.EventLogQuery{InvocationID: "inv_a1", Limit: 1})
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, invocation.EventCreated, events[0].Type)
	events, err = s.InvocationLog(ctx, store.EventLogQuery{InvocationID: "inv_a1", AfterSeq: 1, Limit: 10})
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, invocation.EventStarted, events[0].Type)
	events, err = s.InvocationLog(ctx, store.EventLogQuery{InvocationID: "inv_none"})
	require.NoError(t, err)
	require.Empty(t, events)
}

// testProjectionRewrite: the transaction side. LockInvocation reads the stored projection,
// RewriteInvocation replaces it (record and columns, as Invocation and ListInvocations see them),
// ReplaceUsage replaces one hour of a tenant's aggregates and leaves the others; Rebuild repairs
// projections damaged through these methods and Verify is clean afterwards.
func testProjectionRewrite(t *testing.T, s store.Store) {
	ctx := context.Background()
	const ep = fnBase + "vendor.app.billing.a.v1~"
	rng := rand.New(rand.NewPCG(11, 12))
	genHistory(t, s, rng, "acme", "inv_1", ep, t0)
	genHistory(t, s, rng, "acme", "inv_2", ep, t0.Add(3*time.Hour))
	now := t0.Add(48 * time.Hour)
	diffs, _ := verifyAll(t, s, now)
	require.Empty(t, diffs)

	_, err := s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	var good invocation.Record
	update(t, s, func(tx store.Tx) error {
		si, err := tx.LockInvocation("acme", "inv_1")
		if err != nil {
			return err
		}
		if err := json.Unmarshal(si.Record, &good); err != nil {
			return err
		}
		good.LastSeq, good.UpdatedAt = si.LastSeq, si.UpdatedAt
		bad := good
		bad.Status, bad.Result, bad.CorrelationID = "zombie", json.RawMessage(`{"forged":true}`), "corr_x"
		return tx.RewriteInvocation(bad)
	})
	rec, err := s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.Equal(t, invocation.Status("zombie"), rec.Status)
	require.JSONEq(t, `{"forged":true}`, string(rec.Result))
	update(t, s, func(tx store.Tx) error {
		_, err := tx.LockInvocation("acme", "inv_none")
		require.ErrorIs(t, err, store.ErrNotFound)
		err = tx.RewriteInvocation(invocation.Record{ID: "inv_none", TenantID: "acme"})
		require.ErrorIs(t, err, store.ErrNotFound)
		return nil
	})

	h0 := invocation.UsageHour(t0)
	rows, err := s.UsageHistory(ctx, "acme", store.UsageQuery{From: h0, To: h0.Add(48 * time.Hour), Width: time.Hour})
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	hour := rows[0].Start
	update(t, s, func(tx store.Tx) error {
		stored, err := tx.UsageRows("acme", hour)
		if err != nil {
			return err
		}
		require.Len(t, stored, 1)
		require.Equal(t, rows[0].Usage, stored[0].Usage)
		ids, err := tx.UsageInvocations("acme", hour, hour.Add(time.Hour))
		if err != nil {
			return err
		}
		require.Contains(t, ids, "inv_1")
		return tx.ReplaceUsage("acme", hour, []store.UsageRow{{EntrypointID: ep, Usage: invocation.Usage{Invocations: 99}},
			{EntrypointID: "ghost", Usage: invocation.Usage{Failed: 1}}, {EntrypointID: "zero"}})
	})
	after, err := s.UsageHistory(ctx, "acme", store.UsageQuery{From: h0, To: h0.Add(48 * time.Hour), Width: time.Hour})
	require.NoError(t, err)
	require.Equal(t, len(rows)+1, len(after), "the hour now has the ghost row; the zero row is not stored")
	require.Equal(t, store.UsageRow{Start: hour, EntrypointID: "ghost", Usage: invocation.Usage{Failed: 1}}, after[0])
	require.Equal(t, store.UsageRow{Start: hour, EntrypointID: ep, Usage: invocation.Usage{Invocations: 99}}, after[1])
	require.Equal(t, rows[1:], after[2:], "other hours untouched")

	diffs, _ = verifyAll(t, s, now)
	fields := map[string]bool{}
	for _, d := range diffs {
		fields[d.Kind+" "+d.Field] = true
	}
	require.True(t, fields["invocation status"], "%v", diffs)
	require.True(t, fields["invocation column status"], "%v", diffs)
	require.True(t, fields["invocation result"], "%v", diffs)
	require.True(t, fields["invocation column correlation_id"], "%v", diffs)
	require.True(t, fields["usage invocations"], "%v", diffs)
	require.True(t, fields["usage failed"], "%v", diffs)

	sum, err := projection.Rebuild(ctx, s, projection.Options{Now: now}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, sum.RebuiltInvocations)
	require.EqualValues(t, 1, sum.RebuiltUsageHours)
	diffs, _ = verifyAll(t, s, now)
	require.Empty(t, diffs)
	rec, err = s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.Equal(t, good, rec)
	fixed, err := s.UsageHistory(ctx, "acme", store.UsageQuery{From: h0, To: h0.Add(48 * time.Hour), Width: time.Hour})
	require.NoError(t, err)
	require.Len(t, fixed, len(rows))
	for i := range rows {
		// The rebuilt cost is the same sum taken in another order.
		require.InDelta(t, rows[i].Usage.Cost, fixed[i].Usage.Cost, 1e-12)
		rows[i].Usage.Cost, fixed[i].Usage.Cost = 0, 0
	}
	require.Equal(t, rows, fixed)
}

// testProjectionConsumptions: the events an invocation consumed (ConsumeEvent) are a projection of
// the journal_resolved events of its log that carry an event_seq. EventConsumptions reads them
// outside and inside a transaction; Verify reports a missing and an extra one; Rebuild replaces
// them (ReplaceEventConsumptions) and leaves another invocation's alone.
func testProjectionConsumptions(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	resolved := func(id string, n int, eventSeq int64) invocation.Event {
		return ev(id, invocation.EventJournalResolved, fmt.Sprintf("wait-%d", n),
			fmt.Sprintf(`{"seq":%d,"event_id":"evt_%d","event_seq":%d}`, n, eventSeq, eventSeq), at(10*n+2))
	}
	for _, id := range []string{"inv_c", "inv_d"} {
		update(t, s, func(tx store.Tx) error {
			_, err := tx.StartInvocation([]invocation.Event{NewInvocationEvent(id, "acme", "ep_1", at(0)),
				ev(id, invocation.EventStarted, "", "", at(1))}, store.Scheduling{})
			return err
		})
		for n, seq := range map[string][]int64{"inv_c": {5, 6}, "inv_d": {8}}[id] {
			update(t, s, func(tx store.Tx) error {
				if _, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: []invocation.Event{
					ev(id, invocation.EventSuspended, fmt.Sprintf("suspend-%d", n+1), `{"reason":"event"}`, at(10*(n+1)+1))}}); err != nil {
					return err
				}
				if _, err := tx.ConsumeEvent("acme", id, seq); err != nil {
					return err
				}
				_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: []invocation.Event{resolved(id, n+1, seq),
					ev(id, invocation.EventResumed, fmt.Sprintf("resume-%d", n+1), "", at(10*(n+1)+3))}})
				return err
			})
		}
	}
	now := t0.Add(48 * time.Hour)
	diffs, _ := verifyAll(t, s, now)
	require.Empty(t, diffs)
	got, err := s.EventConsumptions(ctx, "acme", "inv_c")
	require.NoError(t, err)
	require.Equal(t, []int64{5, 6}, got)
	got, err = s.EventConsumptions(ctx, "other", "inv_c")
	require.NoError(t, err)
	require.Empty(t, got, "another tenant's invocation of that id has consumed nothing")

	// Damage inv_c's: 6 lost, 9 never delivered.
	update(t, s, func(tx store.Tx) error {
		inTx, err := tx.EventConsumptions("acme", "inv_c")
		require.NoError(t, err)
		require.Equal(t, []int64{5, 6}, inTx)
		return tx.ReplaceEventConsumptions("acme", "inv_c", []int64{9, 5})
	})
	got, err = s.EventConsumptions(ctx, "acme", "inv_c")
	require.NoError(t, err)
	require.Equal(t, []int64{5, 9}, got)
	diffs, _ = verifyAll(t, s, now)
	require.Equal(t, []projection.Diff{{Kind: projection.KindInvocation, TenantID: "acme", InvocationID: "inv_c",
		Field: projection.FieldConsumptions, Stored: "[5 9]", Recomputed: "[5 6]"}}, diffs)

	sum, err := projection.Rebuild(ctx, s, projection.Options{Now: now}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, sum.RebuiltInvocations)
	got, err = s.EventConsumptions(ctx, "acme", "inv_c")
	require.NoError(t, err)
	require.Equal(t, []int64{5, 6}, got)
	got, err = s.EventConsumptions(ctx, "acme", "inv_d")
	require.NoError(t, err)
	require.Equal(t, []int64{8}, got)
	diffs, _ = verifyAll(t, s, now)
	require.Empty(t, diffs)
}

// testProjectionLock: the rebuild lock can be taken again once released; on a shared store a
// second holder is refused while the first holds it.
func testProjectionLock(t *testing.T, s store.Store) {
	ctx := context.Background()
	release, err := s.LockProjections(ctx)
	require.NoError(t, err)
	if !s.Exclusive() {
		_, err := s.LockProjections(ctx)
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.NoError(t, release())
	release, err = s.LockProjections(ctx)
	require.NoError(t, err)
	require.NoError(t, release())
}
