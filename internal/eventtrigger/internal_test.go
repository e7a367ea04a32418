package eventtrigger

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/problem"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/trigger"
)

func TestParseWindow(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 24 * time.Hour, "1h": time.Hour, "36h": 36 * time.Hour, "7d": 7 * 24 * time.Hour, "90d": 90 * 24 * time.Hour} {
		got, err := ParseWindow(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"0h", "1y", "h", "-1h", "91d", "2161h", "1.5h", "99999h"} {
		_, err := ParseWindow(in)
		require.Equal(t, 422, problem.From(err).Status, in)
	}
}

func TestQuantile(t *testing.T) {
	n := len(trigger.LatencyBounds) + 1
	require.Nil(t, quantile(make([]int64, n), 0.5))
	h := make([]int64, n)
	h[0], h[3], h[n-1] = 50, 49, 1 // 50 at ≤1 ms, 49 at ≤10 ms, 1 beyond the last bound
	require.EqualValues(t, 1, *quantile(h, 0.5))
	require.EqualValues(t, 10, *quantile(h, 0.99))
	require.EqualValues(t, trigger.LatencyBounds[len(trigger.LatencyBounds)-1], *quantile(h, 1))
}

func TestBuildDefaultsAndBounds(t *testing.T) {
	spec := Spec{EventTypeID: "gts.x.core.events.event.v1~vendor.app.a.b.v1~", EntrypointID: "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~vendor.app.a.b.v1~"}
	tr, err := build(spec, trigger.Trigger{})
	require.NoError(t, err)
	require.Equal(t, trigger.StatusActive, tr.Status)
	require.Equal(t, trigger.ContextSystem, tr.ExecutionContext)
	require.True(t, tr.DeadLetterQueue.Enabled)
	require.False(t, tr.Batch.Enabled)

	spec.Batch = &trigger.Batch{Enabled: true, MaxSize: trigger.MaxBatchSize, MaxWaitMS: trigger.MaxBatchWaitMS}
	_, err = build(spec, trigger.Trigger{})
	require.NoError(t, err, "the bounds themselves are allowed")
	spec.Batch.MaxWaitMS = trigger.MaxBatchWaitMS + 1
	_, err = build(spec, trigger.Trigger{})
	require.Equal(t, "$.batch.max_wait_ms", problem.From(err).Issues[0].Path)
	spec.Batch = &trigger.Batch{Enabled: false, MaxSize: 99999}
	tr, err = build(spec, trigger.Trigger{})
	require.NoError(t, err, "a disabled batch's sizes are not kept")
	require.Equal(t, trigger.Batch{}, tr.Batch)

	topic := "not a gts id"
	spec.DeadLetterQueue = &trigger.DeadLetterQueue{Enabled: true, DLQTopic: &topic}
	_, err = build(spec, trigger.Trigger{})
	require.Equal(t, "$.dead_letter_queue.dlq_topic", problem.From(err).Issues[0].Path)
	spec.DeadLetterQueue = &trigger.DeadLetterQueue{RetryPolicy: &trigger.RetryPolicy{MaxAttempts: 3, BackoffMultiplier: 11}}
	_, err = build(spec, trigger.Trigger{})
	require.Equal(t, "$.dead_letter_queue.retry_policy.backoff_multiplier", problem.From(err).Issues[0].Path)

	spec.DeadLetterQueue = nil
	spec.EventFilterQuery = "payload.x >"
	_, err = build(spec, trigger.Trigger{})
	pe := problem.From(err)
	require.Equal(t, "INVALID_FILTER", pe.Issues[0].Code)
}

// TestPrepareOnlyWhileTheTriggersAreCurrent: Prepare evaluates the cached active triggers' filters
// outside the transaction; Match may use that only while no trigger has changed since.
func TestPrepareOnlyWhileTheTriggersAreCurrent(t *testing.T) {
	const typ = "gts.x.core.events.event.v1~vendor.app.a.b.v1~"
	s := &Service{cache: &activeCache{m: map[[2]string]activeEntry{}}}
	s.cache.m[[2]string{"acme", typ}] = activeEntry{ts: []trigger.Trigger{
		{ID: "big", TenantID: "acme", EventTypeID: typ, EventFilterQuery: "payload.n > 1"},
		{ID: "all", TenantID: "acme", EventTypeID: typ},
		{ID: "small", TenantID: "acme", EventTypeID: typ, EventFilterQuery: "payload.n < 1"},
	}}
	ev := events.Event{ID: "e", TenantID: "acme", TypeID: typ, Payload: json.RawMessage(`{"n": 2}`)}
	p, ok := s.Prepare(ev).(*prematch)
	require.True(t, ok)
	require.Equal(t, []bool{true, true, false}, p.matched)
	require.True(t, s.cache.current(p.gen))
	p.ts[0].BatchDueAt = &time.Time{}
	require.Nil(t, s.cache.m[[2]string{"acme", typ}].ts[0].BatchDueAt, "the prepared triggers are a copy")

	s.cache.invalidate() // a trigger changed
	require.False(t, s.cache.current(p.gen), "Match evaluates again")
	require.Nil(t, s.Prepare(ev), "a cold cache prepares nothing")
	require.Nil(t, (&Service{}).Prepare(ev), "without a cache (a shared store) nothing is prepared")
	require.Nil(t, s.Prepare(events.Event{TenantID: "globex", TypeID: typ}))
}

// TestRunMetricsWritesAtStop: the per-node metrics loop writes what the node buffered when it stops,
// though the batch flusher (Run) never ran on this node.
func TestRunMetricsWritesAtStop(t *testing.T) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	s := New(st, nil, Options{})
	hour := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.metrics.add([]trigger.MetricsDelta{{TenantID: "acme", TriggerID: "t1", Hour: hour, Counters: trigger.Counters{Received: 3}, LatencyMS: -1}})
	require.Equal(t, int64(3), s.metrics.pending("acme", "t1", hour).Received)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.RunMetrics(ctx)
	require.Zero(t, s.metrics.pending("acme", "t1", hour).Received, "the buffer was not written (a failed write keeps it)")
}

// TestInvocationEndedVia: the end of an invocation a trigger started is counted in the trigger's
// metrics; one created otherwise (invocation.ViaOther) is not looked up at all, even when a start
// row names it; a record older than Via is looked up.
func TestInvocationEndedVia(t *testing.T) {
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlstore.Options{})
	require.NoError(t, err)
	defer st.Close()
	s := New(st, nil, Options{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tr := &trigger.Trigger{ID: "t1", TenantID: "acme", EventTypeID: "gts.x.acme.orders.created.v1~", EntrypointID: "ep",
		Status: trigger.StatusActive, ExecutionContext: trigger.ContextSystem, CreatedAt: at, UpdatedAt: at}
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertTrigger(tr); err != nil {
			return err
		}
		for i, id := range []string{"inv_other", "inv_legacy", "inv_trigger"} {
			if err := tx.InsertTriggerStart(trigger.Start{TenantID: "acme", InvocationID: id, TriggerID: "t1", EventSeqs: []int64{int64(i + 1)},
				EventIDs: []string{"e_" + id}, Params: json.RawMessage(`{}`), ReceivedAt: at, StartedAt: at}); err != nil {
				return err
			}
		}
		return nil
	}))
	succeeded := func() int64 {
		rows, err := st.TriggerMetrics(ctx, "acme", "t1", at.Add(-time.Hour))
		require.NoError(t, err)
		var n int64
		for _, r := range rows {
			n += r.Succeeded
		}
		return n
	}
	for _, c := range []struct {
		id, via string
		want    int64
	}{{"inv_other", invocation.ViaOther, 0}, {"inv_legacy", "", 1}, {"inv_trigger", invocation.ViaTrigger, 2}} {
		fin := at.Add(time.Second)
		rec := invocation.Record{ID: c.id, TenantID: "acme", Status: invocation.StatusSucceeded, Via: c.via, FinishedAt: &fin}
		require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return s.InvocationEnded(tx, rec) }))
		require.Equal(t, c.want, succeeded(), c.id)
	}
}
