package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/store"
)

func newSchedule(tenant, id string, due *time.Time) *schedule.Schedule {
	return &schedule.Schedule{ID: id, TenantID: tenant, EntrypointID: "ep", Name: id, Timezone: "UTC",
		Expression: schedule.Expression{Kind: "cron", Value: "* * * * *"}, InputOverrides: []byte(`{}`),
		MissedPolicy: schedule.MissedSkip, ConcurrencyPolicy: schedule.ConcurrencyAllow, Status: schedule.StatusActive,
		NextRunAt: due, DueAt: due, CreatedAt: t0, UpdatedAt: t0}
}

func at(d time.Duration) *time.Time {
	x := t0.Add(d)
	return &x
}

func testSchedules(t *testing.T, s store.Store) {
	ctx := context.Background()
	update := func(fn func(store.Tx) error) error { return s.Update(ctx, fn) }
	require.NoError(t, update(func(tx store.Tx) error {
		for _, sc := range []*schedule.Schedule{newSchedule("a", "s1", at(3*time.Minute)), newSchedule("a", "s2", at(time.Minute)),
			newSchedule("b", "s1", at(2*time.Minute)), newSchedule("a", "paused", nil)} {
			if err := tx.InsertSchedule(sc); err != nil {
				return err
			}
			require.EqualValues(t, 1, sc.Revision)
		}
		return nil
	}))
	err := update(func(tx store.Tx) error { return tx.InsertSchedule(newSchedule("a", "s1", nil)) })
	require.ErrorIs(t, err, store.ErrConflict)

	// Due: by due time, across tenants, bounded; never the ones without a due time.
	due, err := s.DueSchedules(ctx, t0.Add(2*time.Minute), 10)
	require.NoError(t, err)
	require.Len(t, due, 2)
	require.Equal(t, [2]string{"a", "s2"}, [2]string{due[0].TenantID, due[0].ID})
	require.Equal(t, [2]string{"b", "s1"}, [2]string{due[1].TenantID, due[1].ID})
	due, err = s.DueSchedules(ctx, t0.Add(time.Hour), 1)
	require.NoError(t, err)
	require.Len(t, due, 1)
	next, err := s.NextScheduleDue(ctx)
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Minute), *next)

	// Optimistic updates.
	sc, err := s.Schedule(ctx, "a", "s2")
	require.NoError(t, err)
	sc.DueAt, sc.Name = nil, "renamed"
	require.NoError(t, update(func(tx store.Tx) error { return tx.UpdateSchedule(&sc) }))
	require.EqualValues(t, 2, sc.Revision)
	stale := sc
	stale.Revision = 1
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.UpdateSchedule(&stale) }), store.ErrStale)
	gone := newSchedule("a", "nope", nil)
	gone.Revision = 1
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.UpdateSchedule(gone) }), store.ErrNotFound)
	got, err := s.Schedule(ctx, "a", "s2")
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Name)
	require.Nil(t, got.DueAt)
	_, err = s.Schedule(ctx, "b", "s2")
	require.ErrorIs(t, err, store.ErrNotFound, "tenant scoped")

	// Lists and counts are tenant scoped.
	page, err := s.ListSchedules(ctx, "a", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 3)
	f, err := odata.ParseFilter("status eq 'active' and schedule_id eq 's1'")
	require.NoError(t, err)
	page, err = s.ListSchedules(ctx, "a", store.ListQuery{Limit: 10, Filter: f})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	n, err := s.CountTenantSchedules(ctx, "b")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	// Runs: an instant is recorded once (manual runs are not instants).
	run := func(id string, d time.Duration, kind schedule.RunKind, state schedule.RunState) schedule.Run {
		return schedule.Run{ID: id, TenantID: "a", ScheduleID: "s1", ScheduledAt: t0.Add(d), Kind: kind, State: state,
			InvocationID: "inv_" + id, RecordedAt: t0.Add(d)}
	}
	require.NoError(t, update(func(tx store.Tx) error {
		for _, r := range []schedule.Run{run("r1", 0, schedule.KindScheduled, schedule.RunStarted),
			run("r2", time.Minute, schedule.KindCatchUp, schedule.RunPending), run("r3", 2*time.Minute, schedule.KindCatchUp, schedule.RunPending),
			run("m1", 0, schedule.KindManual, schedule.RunStarted), run("r4", 10*time.Minute, schedule.KindScheduled, schedule.RunStarted)} {
			if err := tx.InsertScheduleRun(r); err != nil {
				return err
			}
		}
		return nil
	}))
	err = update(func(tx store.Tx) error {
		return tx.InsertScheduleRun(run("dup", 0, schedule.KindScheduled, schedule.RunSkipped))
	})
	require.ErrorIs(t, err, store.ErrConflict)
	require.NoError(t, update(func(tx store.Tx) error {
		p, err := tx.PendingRuns("a", "s1", 10)
		require.NoError(t, err)
		require.Equal(t, []string{"r2", "r3"}, runIDs(p))
		st, err := tx.StartedRuns("a", "s1", 10)
		require.NoError(t, err)
		require.Equal(t, "r4", st[0].ID)
		require.ElementsMatch(t, []string{"r1", "m1"}, runIDs(st)[1:], "same instant: either order")
		w, err := tx.WithdrawRuns("a", "s1", t0.Add(5*time.Minute))
		require.NoError(t, err)
		require.Equal(t, []string{"r4"}, runIDs(w), "only scheduled runs after the time")
		return nil
	}))
	hist, err := s.ScheduleRuns(ctx, "a", "s1", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, hist.Items, 4)
	require.Equal(t, "r3", hist.Items[0].ID, "newest instant first")
	require.Equal(t, "", hist.Items[len(hist.Items)-1].InvocationStatus, "no such invocation")
	empty, err := s.ScheduleRuns(ctx, "b", "s1", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, empty.Items, "tenant scoped")

	// Retention deletes runs by age, never pending ones.
	var purged int64
	require.NoError(t, update(func(tx store.Tx) error {
		purged, err = tx.PurgeScheduleRuns("a", t0.Add(time.Hour), 100)
		return err
	}))
	require.EqualValues(t, 2, purged, "r1 and m1; r2 and r3 are pending")
	// Deleting a schedule deletes its runs.
	require.NoError(t, update(func(tx store.Tx) error { return tx.DeleteSchedule("a", "s1") }))
	hist, err = s.ScheduleRuns(ctx, "a", "s1", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, hist.Items)
	require.ErrorIs(t, update(func(tx store.Tx) error { return tx.DeleteSchedule("a", "s1") }), store.ErrNotFound)
}

func runIDs(rs []schedule.Run) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testBackfills(t *testing.T, s store.Store) {
	ctx := context.Background()
	b := &schedule.Backfill{ID: "bf", TenantID: "a", EntrypointID: "ep", State: schedule.BackfillRunning, CreatedAt: t0, UpdatedAt: t0,
		Config: schedule.BackfillConfig{ChunkSize: 2, MaxConcurrentRuns: 1}}
	var parts []schedule.Partition
	for i := range 5 {
		parts = append(parts, schedule.Partition{ID: "p" + string(rune('0'+i)), Seq: i, ScheduledAt: t0.Add(time.Duration(i) * time.Hour),
			Chunk: i / 2, State: schedule.PartitionPending})
	}
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.InsertBackfill(b, parts) }))
	require.ErrorIs(t, s.Update(ctx, func(tx store.Tx) error { return tx.InsertBackfill(b, nil) }), store.ErrConflict)

	active, err := s.ActiveBackfills(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, [][2]string{{"a", "bf"}}, active)
	chunks, err := s.PendingChunks(ctx, "a", "bf", 2)
	require.NoError(t, err)
	require.Len(t, chunks, 2)
	require.Len(t, chunks[0], 2)
	require.Len(t, chunks[1], 2)

	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		first := chunks[0]
		first[0].InvocationID, first[1].InvocationID = "inv_0", "inv_1"
		n, err := tx.StartPartitions("a", "bf", first)
		require.Equal(t, 2, n)
		return err
	}))
	chunks, err = s.PendingChunks(ctx, "a", "bf", 5)
	require.NoError(t, err)
	require.Len(t, chunks, 2, "chunk 0 runs; 1 and 2 are pending")
	require.NotContains(t, chunks, 0)
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		p, c, err := tx.SettleBackfill("a", "bf")
		require.Equal(t, schedule.Progress{Total: 5, Pending: 3, Running: 2}, p)
		require.Equal(t, schedule.Chunks{Total: 3, InFlight: 1}, c)
		return err
	}))
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		ids, err := tx.SetPartitions(store.PartitionMove{TenantID: "a", BackfillID: "bf", From: schedule.PartitionRunning, To: schedule.PartitionSkipped})
		require.ElementsMatch(t, []string{"inv_0", "inv_1"}, ids)
		return err
	}))
	got, err := s.Backfill(ctx, "a", "bf")
	require.NoError(t, err)
	got.State = schedule.BackfillCanceled
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.UpdateBackfill(&got) }))
	got.Revision = 1
	require.ErrorIs(t, s.Update(ctx, func(tx store.Tx) error { return tx.UpdateBackfill(&got) }), store.ErrStale)
	active, err = s.ActiveBackfills(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, active)
	_, err = s.Backfill(ctx, "b", "bf")
	require.True(t, errors.Is(err, store.ErrNotFound), "tenant scoped")
	page, err := s.BackfillPartitions(ctx, "a", "bf", store.ListQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 5)
	require.Equal(t, schedule.PartitionSkipped, page.Items[0].State)
}
