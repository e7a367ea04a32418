package invoke

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

// A sync call's start and outcome are one write when the outcome is attached before the committer
// takes the start; otherwise the start is written alone (running, leased) and the outcome follows.
func TestPendingStartWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "s.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := NewService(Config{Store: st, Clock: c, Node: "n", IDs: idgen.UUIDv7{}})
	t.Cleanup(s.Close)
	d := catalog.Definition{}
	d.Traits.Limits.TimeoutSeconds = 30
	now := c.Now()
	pending := func(id string) (*pendingStart, invocation.Record) {
		rec := invocation.Record{ID: id, TenantID: "acme", EntrypointID: "fn", Mode: invocation.ModeSync, Params: []byte(`{}`),
			Attempt: 1, CreatedAt: now}
		start, lease, err := s.spawn.StartEvents(rec, d, now)
		require.NoError(t, err)
		started, err := invocation.Rebuild([]invocation.Event{withSeq(start[0], 1), withSeq(start[1], 2)})
		require.NoError(t, err)
		return newPendingStart(start, lease), started
	}
	types := func(id string) []invocation.EventType {
		evs, err := st.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: id, AfterSeq: 0, Limit: 100})
		require.NoError(t, err)
		var out []invocation.EventType
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}

	// Merged: one write, the whole log, the final record and no lease.
	p, started := pending("inv-merged")
	var oerr error
	p.close, p.next, oerr = s.completer.Closing(started, nil, outcome.Decide(started, d.RetryOf(started), []byte(`{"ok":true}`), nil, false, now), now)
	require.NoError(t, oerr)
	require.NoError(t, st.Update(ctx, p.write))
	require.Equal(t, invocation.StatusSucceeded, p.final.Status)
	got, err := st.Invocation(ctx, "acme", "inv-merged")
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, got.Status)
	require.JSONEq(t, `{"ok":true}`, string(got.Result))
	require.Equal(t, []invocation.EventType{invocation.EventCreated, invocation.EventStarted, invocation.EventSucceeded}, types("inv-merged"))
	due, err := st.NextDue(ctx, now)
	require.NoError(t, err)
	require.Nil(t, due, "a call written whole holds no lease and queues nothing")

	// Taken first: the start alone (running, leased to this process), then the outcome as usual.
	p, started = pending("inv-split")
	require.NoError(t, st.Update(ctx, p.write))
	require.True(t, p.taken)
	got, err = st.Invocation(ctx, "acme", "inv-split")
	require.NoError(t, err)
	require.Equal(t, invocation.StatusRunning, got.Status)
	if string(got.Result) == "null" {
		got.Result = nil // a JSON round trip of no result
	}
	require.Equal(t, started, got, "the attempt runs with the record its start leaves")
	due, err = st.NextDue(ctx, now)
	require.NoError(t, err)
	require.NotNil(t, due, "the running call's lease expires, so a crash is reclaimed")
	events, next, err := s.completer.Closing(started, nil, outcome.Decide(started, d.RetryOf(started), []byte(`{"ok":true}`), nil, false, now), now)
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv-split", Events: events, AppendOptions: store.AppendOptions{RequireLease: s.spawn.LeaseOwner(started), Schedule: &next, Expect: &started}})
		return err
	}))
	require.Equal(t, []invocation.EventType{invocation.EventCreated, invocation.EventStarted, invocation.EventSucceeded}, types("inv-split"))
}

func withSeq(e invocation.Event, seq int64) invocation.Event {
	e.Seq = seq
	return e
}
