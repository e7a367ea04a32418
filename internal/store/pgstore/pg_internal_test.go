package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/tenant"
)

// TestRebind: ? and ?N become $N; quoted text keeps its question marks.
func TestRebind(t *testing.T) {
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
	require.EqualValues(t, 1, s.RetryStats())
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
	require.Equal(t, DefaultRetry.Attempts, runs)

	// Not retryable: ordinary errors and conflicts.
	runs = 0
	boom := errors.New("boom")
	require.ErrorIs(t, s.Update(ctx, func(store.Tx) error { runs++; return boom }), boom)
	require.Equal(t, 1, runs)
}

// TestStatementTimeout: Options.StatementTimeout bounds every statement of the pool's connections.
func TestStatementTimeout(t *testing.T) {
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
	s, err := Open(context.Background(), pgtest.Schema(t), Options{MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()
	var n int64
	require.NoError(t, s.r.QueryRowContext(context.Background(), "SELECT count(*) FROM backfill_partitions WHERE chunk > ?", float64(3)).Scan(&n))
	require.Zero(t, n)
}
