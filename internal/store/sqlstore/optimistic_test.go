package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/storetest"
)

// TestOptimisticAppends: an Append in a closure made with store.Optimistic takes the caller's
// projection (Expect) as current instead of reading it. When it is (the engine's claims and
// attempt ends), nothing runs twice; when it is not (a stale projection, a lease that is
// another's), the closure runs again on a read of the projection and gets the exact answer, and
// nothing of its first run is written, whatever the closure made of the error.
func TestOptimisticAppends(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	var rec invocation.Record
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		var err error
		rec, err = x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_1", "acme", "ep_1", at)}, store.Scheduling{})
		return err
	}))
	started := invocation.Event{Type: invocation.EventStarted, EngineAttempt: 1, LogicalAttempt: 1, At: at,
		IdempotencyKey: invocation.IdempotencyKey("inv_1", "", 1, invocation.EventStarted, "")}
	runs := 0
	appendOpt := func(o store.AppendOptions, swallow bool) (invocation.Record, error) {
		var out invocation.Record
		err := s.Update(store.Optimistic(ctx), func(x store.Tx) error {
			runs++
			var err error
			out, _, err = x.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_1", Events: []invocation.Event{started}, AppendOptions: o})
			if swallow {
				return nil // a closure that makes nothing of the error must not commit what the run wrote
			}
			return err
		})
		return out, err
	}
	lease := &store.Scheduling{LeaseOwner: "node-a/inv_1/1"}

	// A lease the append requires but that is another's: the conditional update matches no row.
	_, err := appendOpt(store.AppendOptions{RequireLease: "node-b/inv_1/1", Expect: &rec, Schedule: lease}, false)
	require.ErrorIs(t, err, store.ErrLeaseLost)
	require.Equal(t, 2, runs, "the optimistic run, then the exact one")
	require.EqualValues(t, 1, s.Missed())

	// The right projection: appended, once.
	runs = 0
	next, err := appendOpt(store.AppendOptions{Expect: &rec, Schedule: lease}, false)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusRunning, next.Status)
	require.Equal(t, 1, runs)
	require.EqualValues(t, 1, s.Missed())

	// A stale projection (rec, before the start), and a closure that swallows the error: its run
	// is rolled back and run again, where ExpectOnly reports the conflict.
	runs = 0
	_, err = appendOpt(store.AppendOptions{Expect: &rec, ExpectOnly: true}, true)
	require.NoError(t, err, "the closure's own answer, on the exact run")
	require.Equal(t, 2, runs)
	require.EqualValues(t, 2, s.Missed())
	_, err = appendOpt(store.AppendOptions{Expect: &rec, ExpectOnly: true}, false)
	require.ErrorIs(t, err, store.ErrConflict)
	got, err := s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.Equal(t, next.LastSeq, got.LastSeq, "nothing of the failed runs was written")
	log, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: "inv_1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, log, 2)
}
