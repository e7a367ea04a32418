package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/egress"
	"github.com/larkrun/lark/internal/idgen"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/invoke"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/scheduler"
	"github.com/larkrun/lark/internal/schema"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// TestFireDueAcrossNodes: two nodes (each its own PostgreSQL pool, invoke and scheduler, as two
// processes) fire the same due schedules at the same instant, concurrently, as a deposed leader and
// its successor may for a moment: each instant of each schedule is recorded once and starts one
// invocation.
func TestFireDueAcrossNodes(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	open := func() store.Store {
		st, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 4})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := newFireEnvOn(t, open(), scheduler.Options{})
	stB := open()
	schemas, err := schema.New()
	require.NoError(t, err)
	invB := invoke.NewService(invoke.Config{Store: stB, Schemas: schemas, Programs: sandbox.NewCache(8),
		Egress: egress.New(egress.Options{}), Clock: a.clk, IDs: idgen.UUIDv7{}, Node: "b"})
	t.Cleanup(invB.Close)
	schedB := scheduler.New(stB, invB, scheduler.Options{Clock: a.clk, IDs: idgen.UUIDv7{}})

	const n = 30
	var ids []string
	for i := range n {
		pol := schedule.ConcurrencyAllow
		if i%2 == 0 {
			pol = schedule.ConcurrencyForbid
		}
		ids = append(ids, a.every5(t, pol).ID)
	}
	for round := range 3 {
		a.clk.Set(time.Date(2026, 3, 1, 12, 5*(round+1), 0, 0, time.UTC))
		var wg sync.WaitGroup
		started := make([]int, 2)
		for i, s := range []*scheduler.Service{a.sched, schedB} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 { // each node fires a few times, as its loop would
					k, _ := s.FireDue(ctx) // a conflict with the other node is an error here, never a second run
					started[i] += k
				}
			}()
		}
		wg.Wait()
		require.LessOrEqual(t, started[0]+started[1], n, "round %d: more runs started than schedules", round)
	}
	invocations := map[string]bool{}
	for _, id := range ids {
		runs := a.runs(t, id)
		seen := map[time.Time]bool{}
		for _, r := range runs {
			require.False(t, seen[r.ScheduledAt], "%s: instant %s recorded twice", id, r.ScheduledAt)
			seen[r.ScheduledAt] = true
			if r.InvocationID != "" {
				require.False(t, invocations[r.InvocationID], "invocation %s started twice", r.InvocationID)
				invocations[r.InvocationID] = true
			}
		}
		require.Len(t, runs, 3, "%s: one run per instant (12:05, 12:10, 12:15): %+v", id, runs)
	}
	page, err := a.st.ListInvocations(ctx, invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, page.Items, len(invocations), "invocations without a run, or runs without one")
}
