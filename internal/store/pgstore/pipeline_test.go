package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/storetest"
)

// started is the started event of invocation id's first attempt.
func started(id string) invocation.Event {
	return invocation.Event{Type: invocation.EventStarted, EngineAttempt: 1, LogicalAttempt: 1, At: d0,
		IdempotencyKey: invocation.IdempotencyKey(id, "", 1, invocation.EventStarted, "")}
}

// TestOptimisticWrites: an optimistic closure (store.Optimistic) in a pipelined transaction is
// answered on assumptions; when one is wrong (an insert met a conflict, the projection moved, the
// lease is another's) the batch is replayed without pipelining and the closure gets the exact
// answer, and nothing of the wrong run is applied. Right assumptions cost no replay.
func TestOptimisticWrites(t *testing.T) {
	t.Parallel()
	s := openTemp(t, pgstore.Options{MaxConns: 3})
	defer s.Close()
	ctx := context.Background()
	opt := store.Optimistic(ctx)
	var rec invocation.Record
	require.NoError(t, s.Update(opt, func(x store.Tx) error {
		var err error
		rec, err = x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_1", "acme", "ep_1", d0)}, store.Scheduling{})
		return err
	}))
	require.Zero(t, s.Replays(), "a right assumption costs no replay")

	// The same invocation again: the insert's assumption fails at commit; the replay reports it.
	runs := 0
	err := s.Update(opt, func(x store.Tx) error {
		runs++
		_, err := x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_1", "acme", "ep_1", d0)}, store.Scheduling{})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, 2, runs, "the pipelined run, then its replay")
	require.EqualValues(t, 1, s.Replays())

	// A lease the append requires but that is another's: the conditional update affects no row.
	owner := "node-a/inv_1/1"
	lease := &store.Scheduling{LeaseOwner: owner}
	_, _, err = appendOptimistic(s, rec, store.AppendOptions{RequireLease: "node-b/inv_1/1", Expect: &rec, Schedule: lease})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	require.EqualValues(t, 2, s.Replays())

	// The right projection: appended without a read and without a replay.
	next, appended, err := appendOptimistic(s, rec, store.AppendOptions{Expect: &rec, Schedule: lease})
	require.NoError(t, err)
	require.Len(t, appended, 1)
	require.Equal(t, invocation.StatusRunning, next.Status)
	require.EqualValues(t, 2, s.Replays())

	// A stale projection (rec, before the start): the replay reads the real one, where started no
	// longer applies; and nothing of the failed run was written.
	_, _, err = appendOptimistic(s, rec, store.AppendOptions{Expect: &rec, ExpectOnly: true})
	require.ErrorIs(t, err, store.ErrConflict)
	require.EqualValues(t, 3, s.Replays())
	got, err := s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.Equal(t, next.LastSeq, got.LastSeq)

	// Several closures in one batch: one's wrong assumption replays the batch, the others commit
	// once.
	waits := make([]func() error, 0, 3)
	for _, id := range []string{"inv_2", "inv_1", "inv_3"} {
		waits = append(waits, s.Enqueue(opt, func(x store.Tx) error {
			_, err := x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(id, "acme", "ep_1", d0)}, store.Scheduling{})
			return err
		}))
	}
	require.NoError(t, waits[0]())
	require.ErrorIs(t, waits[1](), store.ErrConflict)
	require.NoError(t, waits[2]())
	for _, id := range []string{"inv_2", "inv_3"} {
		_, err := s.Invocation(ctx, "acme", id)
		require.NoError(t, err)
	}
}

// appendOptimistic appends rec's started event in an optimistic closure.
func appendOptimistic(s store.Store, rec invocation.Record, o store.AppendOptions) (invocation.Record, []invocation.Event, error) {
	var out invocation.Record
	var appended []invocation.Event
	err := s.Update(store.Optimistic(context.Background()), func(x store.Tx) error {
		var err error
		out, appended, err = x.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID,
			Events: []invocation.Event{started(rec.ID)}, AppendOptions: o})
		return err
	})
	if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrLeaseLost) {
		return out, nil, err
	}
	return out, appended, err
}

// TestOptimisticUsage: the usage deltas of a batch's optimistic closures are written once per row
// before the batch commits, and add up to the same aggregates; a closure that is not optimistic
// sees them exact, whether it runs in the same batch or a later one, and one that fails loses
// none of them.
func TestOptimisticUsage(t *testing.T) {
	t.Parallel()
	s := openTemp(t, pgstore.Options{MaxConns: 3, Writers: 1})
	defer s.Close()
	opt := store.Optimistic(context.Background())
	const n = 20
	waits := make([]func() error, 0, n)
	for i := range n {
		id := fmt.Sprintf("inv_u%02d", i)
		waits = append(waits, s.Enqueue(opt, func(x store.Tx) error {
			_, err := x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(id, "acme", "ep_1", d0)}, store.Scheduling{})
			return err
		}))
	}
	// A closure that is not optimistic and fails: the usage written before it ran is gathered
	// again, not lost with its savepoint.
	boom := errors.New("boom")
	failing := s.Enqueue(context.Background(), func(store.Tx) error { return boom })
	var seen int64
	waits = append(waits, s.Enqueue(context.Background(), func(x store.Tx) error {
		rows, err := x.UsageRows("acme", d0)
		seen = 0
		for _, r := range rows {
			seen += r.Usage.Invocations
		}
		return err
	}))
	for _, w := range waits {
		require.NoError(t, w())
	}
	require.ErrorIs(t, failing(), boom)
	require.EqualValues(t, n, seen, "the closure behind them sees every invocation counted")
	var total int64
	require.NoError(t, s.Update(context.Background(), func(x store.Tx) error {
		rows, err := x.UsageRows("acme", d0)
		total = 0
		for _, r := range rows {
			total += r.Usage.Invocations
		}
		return err
	}))
	require.EqualValues(t, n, total)
	require.Zero(t, s.Replays())
}
