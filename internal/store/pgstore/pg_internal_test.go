package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/store/storetest"
	"github.com/larkrun/lark/internal/tenant"
)

// TestRebind: ? and ?N become $N; quoted text keeps its question marks.
func TestRebind(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"SELECT 1":                                  "SELECT 1",
		"a = ? AND b = ?":                           "a = $1 AND b = $2",
		"a > ?1 AND b = ?2 AND c = ?1":              "a > $1 AND b = $2 AND c = $1",
		`x LIKE ? ESCAPE '\' AND y = '?' AND z = ?`: `x LIKE $1 ESCAPE '\' AND y = '?' AND z = $2`,
		`"we?ird" = ?`:                              `"we?ird" = $1`,
	} {
		require.Equal(t, want, rebind(in), in)
	}
}

// forceSerializationFailure runs a statement that fails as a serialization failure would (SQLSTATE
// 40001), inside the closure's transaction.
func forceSerializationFailure(x store.Tx) error {
	_, err := x.(*tx).t.ExecContext(bg, `DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = 'serialization_failure'; END $$`)
	return err
}

// TestRetrySerializationFailure: a closure whose first run fails with 40001 is run again and its
// second run's write commits; its AfterCommit hooks run once, for the run that committed. A
// closure failing with an ordinary error runs once.
func TestRetrySerializationFailure(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), pgtest.Schema(t), Options{MaxConns: 3})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()

	runs, hooks := 0, 0
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		runs++
		if err := x.PutTenant(tenant.Policy{TenantID: fmt.Sprintf("run%d", runs), Enabled: true}); err != nil {
			return err
		}
		x.AfterCommit(func() { hooks++ })
		if runs == 1 {
			return forceSerializationFailure(x)
		}
		return nil
	}))
	require.Equal(t, 2, runs)
	require.Equal(t, 1, hooks)
	// Run again as a retry, or, pipelined, as the replay of its batch (the failure met at commit).
	require.EqualValues(t, 1, s.RetryStats()+s.Replays())
	_, err = s.Tenant(ctx, "run1")
	require.ErrorIs(t, err, store.ErrNotFound, "the failed run's write was rolled back")
	_, err = s.Tenant(ctx, "run2")
	require.NoError(t, err)

	// Enqueue retries the same way.
	runs = 0
	wait := s.Enqueue(ctx, func(x store.Tx) error {
		runs++
		if runs == 1 {
			return forceSerializationFailure(x)
		}
		return x.PutTenant(tenant.Policy{TenantID: "enqueued", Enabled: true})
	})
	require.NoError(t, wait())
	require.Equal(t, 2, runs)
	_, err = s.Tenant(ctx, "enqueued")
	require.NoError(t, err)

	// Attempts are bounded: a closure that always fails gives up with the error.
	runs = 0
	err = s.Update(ctx, func(x store.Tx) error { runs++; return forceSerializationFailure(x) })
	require.True(t, retryable(err), "%v", err)
	// Each attempt is two runs: pipelined (the failure is met at commit), then its replay.
	require.Equal(t, 2*DefaultRetry.Attempts, runs)

	// Not retryable: ordinary errors and conflicts.
	runs = 0
	boom := errors.New("boom")
	require.ErrorIs(t, s.Update(ctx, func(store.Tx) error { runs++; return boom }), boom)
	require.Equal(t, 1, runs)
}

// TestStatementTimeout: Options.StatementTimeout bounds every statement of the pool's connections.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), pgtest.Schema(t), Options{MaxConns: 2, StatementTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.r.ExecContext(context.Background(), "SELECT pg_sleep(5)")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "57014", pgErr.Code, "query_canceled")
}

// TestCursorNumbers: a keyset cursor carries numbers as JSON (float64 once decoded); they bind to
// the integer columns they came from.
func TestCursorNumbers(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), pgtest.Schema(t), Options{MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()
	var n int64
	require.NoError(t, s.r.QueryRowContext(context.Background(), "SELECT count(*) FROM backfill_partitions WHERE chunk > ?", float64(3)).Scan(&n))
	require.Zero(t, n)
}

// TestRetryDeadlock: two processes' writes that lock two rows in opposite orders deadlock;
// PostgreSQL aborts one (40P01), which is run again and commits: both writes apply.
func TestRetryDeadlock(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	// Unpipelined, so that each write's first row is locked before it waits for the other's (a
	// pipelined transaction sends its writes with its next read or its commit).
	a, err := Open(ctx, url, Options{MaxConns: 2, NoPipeline: true})
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(ctx, url, Options{MaxConns: 2, NoPipeline: true})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, a.Update(ctx, func(x store.Tx) error {
		return errors.Join(x.PutTenant(tenant.Policy{TenantID: "x"}), x.PutTenant(tenant.Policy{TenantID: "y"}))
	}))
	// Each write takes its first row, waits (on its first run only) until the other has taken its
	// own, then takes the other's.
	var firstA, firstB sync.WaitGroup
	firstA.Add(1)
	firstB.Add(1)
	var onceA, onceB sync.Once
	write := func(s *Store, first, second string, mine, theirs *sync.WaitGroup, once *sync.Once) error {
		return s.Update(ctx, func(x store.Tx) error {
			if err := x.PutTenant(tenant.Policy{TenantID: first, Enabled: true}); err != nil {
				return err
			}
			once.Do(func() { mine.Done(); theirs.Wait() })
			return x.PutTenant(tenant.Policy{TenantID: second, Enabled: true})
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- write(a, "x", "y", &firstA, &firstB, &onceA) }()
	go func() { errs <- write(b, "y", "x", &firstB, &firstA, &onceB) }()
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.EqualValues(t, 1, a.RetryStats()+b.RetryStats(), "one of the two was aborted as the deadlock's victim and run again")
	for _, id := range []string{"x", "y"} {
		p, err := a.Tenant(ctx, id)
		require.NoError(t, err)
		require.True(t, p.Enabled)
	}
}

// TestReconnect: connections the server dropped (a restart, an administrator's
// pg_terminate_backend) are replaced; the next write and read succeed.
func TestReconnect(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	s, err := Open(ctx, url, Options{MaxConns: 3})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Update(ctx, func(x store.Tx) error { return x.PutTenant(tenant.Policy{TenantID: "a"}) }))
	pids := s.backendPIDs(ctx, t)
	admin, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	var killed int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM unnest($1::int[]) AS pid", pids).Scan(&killed))
	require.Positive(t, killed)
	require.NoError(t, s.Update(ctx, func(x store.Tx) error { return x.PutTenant(tenant.Policy{TenantID: "b"}) }))
	_, err = s.Tenant(ctx, "b")
	require.NoError(t, err)
}

// backendPIDs returns the server pids of the pool's connections (each acquired once).
func (s *Store) backendPIDs(ctx context.Context, t *testing.T) []int32 {
	t.Helper()
	conns, err := s.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conns.Release()
	var pids []int32
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		pids = append(pids, int32(c.Conn().PgConn().PID()))
		c.Release()
	}
	return append(pids, int32(conns.Conn().PgConn().PID()))
}

// TestRetryable: which failures are run again.
func TestRetryable(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code} }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{store.ErrConflict, false},
		{pg("23505"), false},
		{pg("57014"), false}, // statement timeout: the same statement would time out again
		{pg("40001"), true},
		{fmt.Errorf("commit: %w", pg("40001")), true},
		{pg("40P01"), true},
		{fmt.Errorf("begin: %w", pg("57P01")), true},
		{pg("08006"), true},
		{fmt.Errorf("commit: %w", pg("57P01")), false}, // the commit may have applied
		{fmt.Errorf("commit: %w", pg("08006")), false},
		// A connection lost, or past its deadline, before the COMMIT was sent: nothing was applied.
		{fmt.Errorf("rollback to savepoint: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("commit: %w", context.DeadlineExceeded), false}, // in doubt
		{fmt.Errorf("commit: %w", io.EOF), false},
	} {
		require.Equal(t, c.want, retryable(c.err), "%v", c.err)
	}
}

// TestConflictKeepsTransaction: a conflict (an event at a seq already taken, a duplicate schedule)
// is store.ErrConflict and leaves the transaction usable: a closure that handles it goes on and
// commits. (PostgreSQL aborts a transaction at its first error, so conflicts must not be errors.)
func TestConflictKeepsTransaction(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), pgtest.Schema(t), Options{MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		_, err := x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_1", "acme", "ep", at)}, store.Scheduling{})
		return err
	}))
	// (Asserted outside the closure, which runs on the committer's goroutine.)
	var seqErr, keyErr error
	var inserted bool
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		e := invocation.Event{InvocationID: "inv_1", Seq: 1, Type: invocation.EventCreated, IdempotencyKey: "other", At: at}
		_, seqErr = x.(*tx).InsertInvocationEvent(e)
		e.IdempotencyKey = storetest.NewInvocationEvent("inv_1", "acme", "ep", at).IdempotencyKey
		inserted, keyErr = x.(*tx).InsertInvocationEvent(e)
		return x.PutTenant(tenant.Policy{TenantID: "after"})
	}))
	require.ErrorIs(t, seqErr, store.ErrConflict, "seq 1 is taken")
	require.NoError(t, keyErr)
	require.False(t, inserted, "already logged: skipped")
	_, err = s.Tenant(ctx, "after")
	require.NoError(t, err, "the closure's write after the conflicts committed")
}

// TestJSONVerbatim: stored JSON comes back byte for byte as it was written (text, not jsonb): numbers
// are not reformatted (no float rounding, no exponent rewriting) and keys keep their order.
func TestJSONVerbatim(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), pgtest.Schema(t), Options{MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	params := `{"z": 1, "a":1.50e3,"n":123456789012345678901234567890,"f":0.1000}`
	e := storetest.NewInvocationEvent("inv_1", "acme", "ep", at)
	var rec invocation.Record
	require.NoError(t, invocation.DecodeJSON(e.Data, &rec))
	rec.Params = []byte(params)
	e, err = storetest.CreatedEvent(rec)
	require.NoError(t, err)
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		_, err := x.StartInvocation([]invocation.Event{e}, store.Scheduling{})
		return err
	}))
	got, err := s.Invocation(ctx, "acme", "inv_1")
	require.NoError(t, err)
	require.Equal(t, `{"z":1,"a":1.50e3,"n":123456789012345678901234567890,"f":0.1000}`, string(got.Params))
	var raw string
	require.NoError(t, s.r.QueryRowContext(ctx, "SELECT record FROM invocations WHERE id = ?", "inv_1").Scan(&raw))
	require.Contains(t, raw, `123456789012345678901234567890`)
	require.Contains(t, raw, `1.50e3`)
	require.Contains(t, raw, `0.1000`)
}

// TestPlainInsert: only a one-row INSERT … VALUES (…) ON CONFLICT DO NOTHING loses its clause when
// it is expected to insert its row; anything else keeps the expectation's wrapper.
func TestPlainInsert(t *testing.T) {
	t.Parallel()
	q, ok := plainInsert("INSERT INTO t (a, b) VALUES ($1, $2)\n\t\tON CONFLICT DO NOTHING")
	require.True(t, ok)
	require.Equal(t, "INSERT INTO t (a, b) VALUES ($1, $2)", q)
	for _, other := range []string{
		"INSERT INTO t (a) VALUES ($1)",
		"INSERT INTO t (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = excluded.a",
		"INSERT INTO t (a) VALUES ($1), ($2) ON CONFLICT DO NOTHING",
		"INSERT INTO t (a) SELECT a FROM u ON CONFLICT DO NOTHING",
		"UPDATE t SET a = $1 WHERE b = $2",
	} {
		_, ok := plainInsert(other)
		require.False(t, ok, other)
	}
	d := &deferred{sql: "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING", expect: 1}
	require.Equal(t, "INSERT INTO t (a) VALUES ($1)", d.text())
	d.expect = 0
	require.Contains(t, d.text(), "lark_expect", "a statement expected to insert nothing keeps the check")
	d.expect = -1
	require.Equal(t, d.sql, d.text())
}

// TestInvocationQueue: invocation_queue holds exactly the invocations with available_at set, kept
// by the trigger on every write that sets, moves or clears it (and on a delete), and the store
// vacuums it on its own.
func TestInvocationQueue(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), pgtest.Schema(t), Options{MaxConns: 3, QueueVacuum: 20 * time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	queued := func() map[string]string {
		rows, err := s.pool.Query(ctx, "SELECT q.id, q.tenant_id || '/' || q.entrypoint_ref || '@' || q.available_at FROM invocation_queue q ORDER BY id")
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var id, v string
			require.NoError(t, rows.Scan(&id, &v))
			out[id] = v
		}
		require.NoError(t, rows.Err())
		return out
	}
	d0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := d0
	later := d0.Add(time.Minute)
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		for _, id := range []string{"inv_a", "inv_b", "inv_c"} {
			if _, err := x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(id, "acme", "ep_1", d0)},
				store.Scheduling{AvailableAt: &at}); err != nil {
				return err
			}
		}
		_, err := x.StartInvocation([]invocation.Event{storetest.NewInvocationEvent("inv_d", "acme", "ep_1", d0)}, store.Scheduling{})
		return err
	}))
	q := queued()
	require.Len(t, q, 3, "inv_d is not queued")
	require.Equal(t, "acme/ep_1@"+ts(d0), q["inv_a"])

	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		if err := x.SetScheduling("acme", "inv_a", store.Scheduling{LeaseOwner: "node/1", LeaseExpiresAt: &later}); err != nil {
			return err // claimed: out of the queue
		}
		if err := x.SetScheduling("acme", "inv_b", store.Scheduling{AvailableAt: &later}); err != nil {
			return err // moved
		}
		return x.SetScheduling("acme", "inv_d", store.Scheduling{AvailableAt: &at}) // queued again
	}))
	_, err = s.pool.Exec(ctx, "DELETE FROM invocation_events WHERE invocation_id = 'inv_c'")
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, "DELETE FROM invocations WHERE id = 'inv_c'")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"inv_b": "acme/ep_1@" + ts(later), "inv_d": "acme/ep_1@" + ts(d0)}, queued())

	deadline := time.Now().Add(10 * time.Second)
	for s.vacuum.runs.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "the queue was never vacuumed")
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInvocationQueueMigration: an invocation queued before migration 00005 is in the queue table
// after it, and a claim finds it.
func TestInvocationQueueMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	prov, err := goose.NewProvider(goose.DialectPostgres, db, Migrations())
	require.NoError(t, err)
	_, err = prov.UpTo(ctx, 4)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO invocations (id, tenant_id, entrypoint_ref, entrypoint_id, status, mode, correlation_id,
		last_seq, record, created_at, updated_at, available_at) VALUES
		('inv_q', 'acme', 'ep_1', 'ep', 'queued', 'async', 'c', 1, '{}', '2026-11-26T00:00:00.000000Z', '2026-11-26T00:00:00.000000Z', '2026-11-26T00:00:00.000000Z'),
		('inv_r', 'acme', 'ep_1', 'ep', 'running', 'async', 'c', 2, '{}', '2026-11-26T00:00:00.000000Z', '2026-11-26T00:00:00.000000Z', NULL)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := Open(ctx, url, Options{MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()
	var due []store.Runnable
	require.NoError(t, s.Update(ctx, func(x store.Tx) error {
		due, err = x.DueWork(store.DueWorkQuery{TenantID: "acme", EntrypointRef: "ep_1", Now: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), Limit: 10})
		return err
	}))
	require.Len(t, due, 1)
	require.Equal(t, "inv_q", due[0].InvocationID)
}
