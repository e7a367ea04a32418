package writer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/storetest"
)

// TestWakesTheDispatcherWhenWorkMayRun: a write that queues work or ends an invocation that ran
// (a dispatcher slot, a running count) wakes the dispatcher; a sync call written whole (created
// and ended in one transaction) does not, since it held neither.
func TestWakesTheDispatcherWhenWorkMayRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wakes := 0
	_, c, s := newWriter(t, func() { wakes++ })
	rec := func(id string, mode invocation.Mode) invocation.Record { return newRecord(id, mode, c.Now()) }
	lifecycle := func(id string) []invocation.Event {
		created, err := storetest.CreatedEvent(rec(id, invocation.ModeSync))
		require.NoError(t, err)
		return []invocation.Event{created,
			{Type: invocation.EventStarted, EngineAttempt: 1, LogicalAttempt: 1, At: c.Now(), IdempotencyKey: invocation.IdempotencyKey(id, "", 1, invocation.EventStarted, "")},
			{Type: invocation.EventSucceeded, EngineAttempt: 1, LogicalAttempt: 1, At: c.Now(), Data: json.RawMessage(`{"result":{}}`),
				IdempotencyKey: invocation.IdempotencyKey(id, "", 1, invocation.EventSucceeded, "")}}
	}
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.StartInvocation(lifecycle("inv-sync"), store.Scheduling{})
		return err
	}))
	require.Zero(t, wakes, "a sync call written whole")

	created, err := storetest.CreatedEvent(rec("inv-async", invocation.ModeAsync))
	require.NoError(t, err)
	now := c.Now()
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.StartInvocation([]invocation.Event{created}, store.Scheduling{AvailableAt: &now})
		return err
	}))
	require.Equal(t, 1, wakes, "queued work")
	all := lifecycle("inv-async")[1:]
	for i, e := range all {
		require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
			_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv-async", Events: []invocation.Event{e}})
			return err
		}))
		require.Equal(t, 1+i, wakes, "started: nothing freed; succeeded: a slot")
	}
}
