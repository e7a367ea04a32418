package writer_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
	"github.com/larkrun/lark/internal/writer"
)

// TestWakesTheDispatcherWhenWorkMayRun: a write that queues work or ends an invocation that ran
// (a dispatcher slot, a running count) wakes the dispatcher; a sync call written whole (created
// and ended in one transaction) does not, since it held neither.
func TestWakesTheDispatcherWhenWorkMayRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "w.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	wakes := 0
	s := writer.New(writer.Config{Store: st, Clock: c, Wake: func() { wakes++ }})
	rec := func(id string, mode invocation.Mode) invocation.Record {
		return invocation.Record{ID: id, TenantID: "acme", EntrypointRef: "ep", EntrypointID: "fn", SubjectID: "bob",
			Mode: mode, Params: json.RawMessage(`{}`), CorrelationID: "corr-" + id, CreatedAt: c.Now(), Attempt: 1}
	}
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
