package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/store/storetest"
)

// TestMigrateConcurrently: eight processes starting together on one schema migrate it once (goose runs
// under a PostgreSQL advisory lock): both opens succeed, and each migration is recorded once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	stores := make([]*pgstore.Store, 8)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = pgstore.Open(ctx, url, pgstore.Options{MaxConns: 2})
		}()
	}
	close(start)
	wg.Wait()
	for i, s := range stores {
		require.NoError(t, errs[i])
		defer s.Close()
		require.NoError(t, s.Ping(ctx))
	}
	var applied, distinct int
	require.NoError(t, stores[0].Pool().QueryRow(ctx,
		"SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0").Scan(&applied, &distinct))
	require.Equal(t, distinct, applied, "a migration was applied twice")
	require.Positive(t, applied)
}

// queue puts n due invocations of one entrypoint version on the queue.
func queue(t *testing.T, s store.Store, n int, at time.Time) {
	t.Helper()
	require.NoError(t, s.Update(context.Background(), func(x store.Tx) error {
		for i := range n {
			e := storetest.NewInvocationEvent(fmt.Sprintf("inv_%04d", i), "acme", "ep_ref", at)
			if _, err := x.StartInvocation([]invocation.Event{e}, store.Scheduling{AvailableAt: &at}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// claim takes up to limit due invocations: it reads them (DueWork locks them FOR UPDATE SKIP
// LOCKED) and leases them to owner, in one transaction, as the dispatcher's claim does. hold, when
// set, runs between the two, with the rows locked.
func claim(s store.Store, owner string, at time.Time, limit int, hold func()) ([]string, error) {
	var got []string
	err := s.Update(context.Background(), func(x store.Tx) error {
		got = got[:0]
		due, err := x.DueWork(store.DueWorkQuery{TenantID: "acme", EntrypointRef: "ep_ref", Now: at, Limit: limit})
		if err != nil {
			return err
		}
		if hold != nil {
			hold()
		}
		exp := at.Add(time.Minute)
		for _, r := range due {
			if err := x.SetScheduling(r.TenantID, r.InvocationID, store.Scheduling{LeaseOwner: owner, LeaseExpiresAt: &exp}); err != nil {
				return err
			}
			got = append(got, r.InvocationID)
		}
		return nil
	})
	return got, err
}

// TestClaimSkipsLocked: two processes (two stores on one schema, each with its own pool and
// committer) claim from one queue. While one holds its claim's rows locked, the other neither waits
// for them nor takes them: it takes the rest; under concurrent claiming no invocation is ever
// claimed twice and none is left behind.
func TestClaimSkipsLocked(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	a, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 4})
	require.NoError(t, err)
	defer a.Close()
	b, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 4})
	require.NoError(t, err)
	defer b.Close()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	queue(t, a, 10, at)

	// A locks 3 rows and holds them until B has claimed.
	locked, release := make(chan struct{}), make(chan struct{})
	var fromA []string
	var errA error
	done := make(chan struct{})
	go func() {
		defer close(done)
		fromA, errA = claim(a, "node-a", at, 3, func() { close(locked); <-release })
	}()
	<-locked
	claimed := make(chan struct{})
	var fromB []string
	var errB error
	go func() {
		defer close(claimed)
		fromB, errB = claim(b, "node-b", at, 10, nil)
	}()
	select {
	case <-claimed:
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("B waited on the rows A holds instead of skipping them")
	}
	close(release)
	<-done
	require.NoError(t, errA)
	require.NoError(t, errB)
	require.Len(t, fromA, 3)
	require.Len(t, fromB, 7, "B takes every row A does not hold")
	require.Empty(t, intersect(fromA, fromB))

	// Many claimers on both stores at once: every invocation exactly once.
	require.NoError(t, a.Update(ctx, func(x store.Tx) error {
		for i := 100; i < 300; i++ {
			e := storetest.NewInvocationEvent(fmt.Sprintf("inv_%04d", i), "acme", "ep_ref", at)
			if _, err := x.StartInvocation([]invocation.Event{e}, store.Scheduling{AvailableAt: &at}); err != nil {
				return err
			}
		}
		return nil
	}))
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		s, owner := store.Store(a), fmt.Sprintf("a%d", i)
		if i%2 == 1 {
			s, owner = b, fmt.Sprintf("b%d", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := claim(s, owner, at, 7, nil)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, id := range got {
					if prev, ok := seen[id]; ok {
						errs <- fmt.Errorf("%s claimed by %s and %s", id, prev, owner)
					}
					seen[id] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, seen, 200)
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	var out []string
	for _, x := range b {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}

// TestLeaseCheckAcrossProcesses: a conditional append (RequireLease) of one process that meets a
// reclaim by another process still in flight waits for it and then fails with ErrLeaseLost; it
// never appends on the strength of the lease it read before the reclaim committed.
func TestLeaseCheckAcrossProcesses(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	a, err := pgstore.Open(ctx, url+"&application_name=lease_check_a", pgstore.Options{MaxConns: 3, Retry: pgstore.RetryPolicy{Attempts: 1}})
	require.NoError(t, err)
	defer a.Close()
	b, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 3})
	require.NoError(t, err)
	defer b.Close()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	exp := at.Add(time.Minute)
	require.NoError(t, a.Update(ctx, func(x store.Tx) error {
		_, err := x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_1", "acme", "ep_ref", at)},
			store.Scheduling{LeaseOwner: "a", LeaseExpiresAt: &exp})
		return err
	}))

	// B reclaims the lease and holds its transaction open.
	taken, release := make(chan struct{}), make(chan struct{})
	bDone := make(chan error, 1)
	go func() {
		bDone <- b.Update(ctx, func(x store.Tx) error {
			if err := x.SetScheduling("acme", "inv_1", store.Scheduling{LeaseOwner: "b", LeaseExpiresAt: &exp}); err != nil {
				return err
			}
			close(taken)
			<-release
			return nil
		})
	}()
	<-taken
	// A appends under the lease it had.
	aDone := make(chan error, 1)
	go func() {
		_, _, err := func() (invocation.Record, []invocation.Event, error) {
			var rec invocation.Record
			var evs []invocation.Event
			err := a.Update(ctx, func(x store.Tx) error {
				var err error
				rec, evs, err = x.Append(store.AppendRequest{TenantID: "acme", InvocationID: "inv_1",
					Events: []invocation.Event{{Type: invocation.EventStarted, EngineAttempt: 1, LogicalAttempt: 1, At: at,
						IdempotencyKey: invocation.IdempotencyKey("inv_1", "", 1, invocation.EventStarted, "")}},
					AppendOptions: store.AppendOptions{RequireLease: "a"}})
				return err
			})
			return rec, evs, err
		}()
		aDone <- err
	}()
	// Wait (with a deadline) until A's write is blocked on the row B holds, then let B commit.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		require.NoError(t, b.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'lease_check_a' AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("A's append never waited on B's row lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	require.NoError(t, <-bDone)
	require.ErrorIs(t, <-aDone, store.ErrLeaseLost)
	rec, err := a.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.EqualValues(t, 1, rec.LastSeq, "nothing was appended")
}
