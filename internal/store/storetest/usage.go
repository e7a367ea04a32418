package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// usageCreated is the created event of an invocation of entrypoint ep whose per-invocation price is cost.
func usageCreated(id, tenantID, ep string, cost float64, at time.Time) invocation.Event {
	e := NewInvocationEvent(id, tenantID, "ep_"+id, at)
	var rec invocation.Record
	if err := json.Unmarshal(e.Data, &rec); err != nil {
		panic(err) // NewInvocationEvent encodes a Record
	}
	rec.EntrypointID, rec.Cost = ep, cost
	e.Data = mustJSON(rec)
	return e
}

// closed is an execution's closing event (see invocation.Execution) with these metrics and cost.
func closed(id string, typ invocation.EventType, step string, billedMS, cpuMS, egress int64, cost float64, at time.Time) invocation.Event {
	m := invocation.Metrics{DurationMS: &billedMS, BilledDurationMS: &billedMS, CPUTimeMS: &cpuMS, MemoryLimitMB: new(int64), EgressBytes: &egress}
	*m.MemoryLimitMB = 256
	return ev(id, typ, step, string(mustJSON(map[string]any{"metrics": m, "cost": cost})), at)
}

// testUsageAggregates: the usage aggregates are a projection of the event log written with it:
// counted in the writing transaction (gone if it rolls back), once per appended event (a replayed
// event adds nothing), by the event's hour and the invocation's entrypoint, per tenant; a finish
// counts once (failed then dead_lettered is one failed run, in one write or two); informational
// events change nothing.
func testUsageAggregates(t *testing.T, s store.Store) {
	ctx := context.Background()
	h0 := t0.Truncate(time.Hour)
	h1 := h0.Add(time.Hour)
	const epA, epB = fnBase + "vendor.app.billing.a.v1~", fnBase + "vendor.app.billing.b.v1.2~"
	hist := func(tenantID string, from time.Time, hours int, width time.Duration) []store.UsageRow {
		t.Helper()
		rows, err := s.UsageHistory(ctx, tenantID, store.UsageQuery{From: from, To: from.Add(time.Duration(hours) * time.Hour), Width: width})
		require.NoError(t, err)
		return rows
	}
	appendAll := func(tenantID, id string, evs ...invocation.Event) []invocation.Event {
		t.Helper()
		var appended []invocation.Event
		// Optimistic, as the engine's writes are: a store may gather their usage and write it once
		// per row before the batch commits.
		require.NoError(t, s.Update(store.Optimistic(ctx), func(tx store.Tx) error {
			var err error
			_, appended, err = tx.Append(store.AppendRequest{TenantID: tenantID, InvocationID: id, Events: evs})
			return err
		}))
		return appended
	}
	start := func(tenantID, id, ep string, cost float64, at time.Time) {
		t.Helper()
		update(t, s, func(tx store.Tx) error {
			_, err := tx.StartInvocation([]invocation.Event{usageCreated(id, tenantID, ep, cost, at),
				ev(id, invocation.EventStarted, "", "", at)}, store.Scheduling{})
			return err
		})
	}

	// An invocation that succeeds in the first hour.
	start("acme", "inv_ok", epA, 0.25, t0)
	appendAll("acme", "inv_ok", ev("inv_ok", invocation.EventLog, "l", `{"message":"x"}`, t0),
		closed("inv_ok", invocation.EventSucceeded, "", 10, 4, 50, 0.5, t0.Add(time.Minute)))
	// One retried in the first hour that fails finally in the second: failed and dead_lettered in one write.
	start("acme", "inv_fail", epA, 0.25, t0)
	appendAll("acme", "inv_fail", closed("inv_fail", invocation.EventRetryScheduled, "", 20, 8, 0, 0.125, t0.Add(2*time.Minute)))
	failAt := h1.Add(5 * time.Minute)
	final := []invocation.Event{ev("inv_fail", invocation.EventStarted, "2", "", failAt),
		closed("inv_fail", invocation.EventFailed, "", 30, 12, 100, 0.25, failAt), ev("inv_fail", invocation.EventDeadLettered, "", "", failAt)}

	// A write that rolls back leaves the aggregates as they were: they are written in its transaction.
	before := hist("acme", h0, 2, time.Hour)
	err := s.Update(store.Optimistic(ctx), func(tx store.Tx) error {
		if _, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_fail", Events: final}); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	require.EqualError(t, err, "roll back")
	require.Equal(t, before, hist("acme", h0, 2, time.Hour), "a rolled-back write adds nothing")

	require.Len(t, appendAll("acme", "inv_fail", final...), 3)
	require.Empty(t, appendAll("acme", "inv_fail", final...), "replayed events are no-ops")
	// Failed and dead_lettered in two writes count the same as in one.
	start("acme", "inv_2w", epA, 0.25, h1)
	appendAll("acme", "inv_2w", closed("inv_2w", invocation.EventFailed, "", 1, 0, 0, 0, h1))
	appendAll("acme", "inv_2w", ev("inv_2w", invocation.EventDeadLettered, "", "", h1))
	// Another entrypoint, queued then canceled in the second hour; and another tenant.
	update(t, s, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{usageCreated("inv_b", "acme", epB, 0.25, h1)}, store.Scheduling{})
		return err
	})
	appendAll("acme", "inv_b", ev("inv_b", invocation.EventCanceled, "", `{"action":"cancel"}`, h1.Add(time.Minute)))
	start("globex", "inv_g", epA, 1, t0)
	appendAll("globex", "inv_g", closed("inv_g", invocation.EventSucceeded, "", 1000, 1000, 1000, 9, t0))

	usageHistories(t, hist, epA, epB)
	usageAfterwards(t, s, func(id string) { start("acme", id, epA, 0, h1) }, appendAll, func() []store.UsageRow { return hist("acme", h0, 2, time.Hour) })
}

// usageHistories is testUsageAggregates' reads of the aggregates its writes left (hist reads a
// tenant's buckets), by hour, over wider buckets, and per tenant.
func usageHistories(t *testing.T, hist func(tenantID string, from time.Time, hours int, width time.Duration) []store.UsageRow, epA, epB string) {
	h0 := t0.Truncate(time.Hour)
	h1 := h0.Add(time.Hour)
	mem := func(billed int64) int64 { return 256 * billed }
	want := []store.UsageRow{
		{Start: h0, EntrypointID: epA, Usage: invocation.Usage{Invocations: 2, Succeeded: 1, Executions: 2, DurationMS: 30,
			BilledDurationMS: 30, CPUTimeMS: 12, MemoryMBMS: mem(30), EgressBytes: 50, Cost: 0.25 + 0.5 + 0.25 + 0.125}},
		{Start: h1, EntrypointID: epA, Usage: invocation.Usage{Invocations: 1, Failed: 2, DeadLettered: 2, Executions: 2,
			DurationMS: 31, BilledDurationMS: 31, CPUTimeMS: 12, MemoryMBMS: mem(31), EgressBytes: 100, Cost: 0.25 + 0.25}},
		{Start: h1, EntrypointID: epB, Usage: invocation.Usage{Invocations: 1, Canceled: 1, Cost: 0.25}},
	}
	require.Equal(t, want, hist("acme", h0, 2, time.Hour))
	require.Equal(t, want[1:], hist("acme", h1, 1, time.Hour), "the range selects hours")
	require.Empty(t, hist("acme", h0.Add(-24*time.Hour), 24, time.Hour), "nothing before")

	// Wider buckets sum the hours: one two-hour bucket.
	sum := want[0].Usage
	sum.Add(want[1].Usage)
	require.Equal(t, []store.UsageRow{{Start: h0, EntrypointID: epA, Usage: sum}, {Start: h0, EntrypointID: epB, Usage: want[2].Usage}},
		hist("acme", h0, 2, 2*time.Hour))

	// Other tenants are separate.
	require.Equal(t, []store.UsageRow{{Start: h0, EntrypointID: epA, Usage: invocation.Usage{Invocations: 1, Succeeded: 1, Executions: 1,
		DurationMS: 1000, BilledDurationMS: 1000, CPUTimeMS: 1000, MemoryMBMS: mem(1000), EgressBytes: 1000, Cost: 10}}},
		hist("globex", h0, 2, time.Hour))
	require.Empty(t, hist("initech", h0, 2, time.Hour))
}

// usageAfterwards is testUsageAggregates' last checks, on its store and fixtures: start starts an
// invocation of acme, appendAll appends to one, hist reads acme's aggregates. Informational events
// leave the aggregates alone; the record carries the cost the aggregates got; the running count.
func usageAfterwards(t *testing.T, s store.Store, start func(id string), appendAll func(tenantID, id string, evs ...invocation.Event) []invocation.Event,
	hist func() []store.UsageRow) {
	ctx := context.Background()
	h1 := t0.Truncate(time.Hour).Add(time.Hour)
	// Informational events (a workflow's journal, its timeline) leave the aggregates alone.
	start("inv_wf")
	before := hist()
	for i := range 3 {
		appendAll("acme", "inv_wf", ev("inv_wf", invocation.EventStepStarted, fmt.Sprint("s", i), `{"step":"s"}`, h1),
			ev("inv_wf", invocation.EventJournal, fmt.Sprint("j", i), fmt.Sprintf(`{"seq":%d,"result":1}`, i), h1))
	}
	require.Equal(t, before, hist())

	// The record carries the same cost the aggregates got, and a rebuild from the log agrees.
	rec, err := s.Invocation(ctx, "acme", "inv_fail")
	require.NoError(t, err)
	require.Equal(t, 0.25+0.125+0.25, rec.Cost)
	evs, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_fail", AfterSeq: 0, Limit: 100})
	require.NoError(t, err)
	rebuilt, err := invocation.Rebuild(evs)
	require.NoError(t, err)
	require.Equal(t, rec, rebuilt)

	// The counts the usage report reads.
	n, err := s.CountTenantRunning(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "inv_wf is running; the others finished")
	n, err = s.CountTenantRunning(ctx, "initech")
	require.NoError(t, err)
	require.Zero(t, n)
}

// testCountTenantEntrypoints: the reader's definition count is Tx.CountTenantEntrypoints'.
func testCountTenantEntrypoints(t *testing.T, s store.Store) {
	seedList(t, s)
	var inTx int64
	update(t, s, func(tx store.Tx) error {
		var err error
		inTx, err = tx.CountTenantEntrypoints("acme")
		return err
	})
	n, err := s.CountTenantEntrypoints(context.Background(), "acme")
	require.NoError(t, err)
	require.Equal(t, inTx, n)
	require.NotZero(t, n)
	n, err = s.CountTenantEntrypoints(context.Background(), "nobody")
	require.NoError(t, err)
	require.Zero(t, n)
}
