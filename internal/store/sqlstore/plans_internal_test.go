package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/scalefill"
	"github.com/larkrun/lark/internal/store/sqlcore"
	"github.com/larkrun/lark/internal/store/storetest"
)

// explainer is a Querier that records SQLite's plan of every query before running it.
type explainer struct {
	db  *sql.DB
	got []storetest.Explained
}

func (e *explainer) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return e.db.ExecContext(ctx, q, args...)
}

func (e *explainer) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return e.db.QueryRowContext(ctx, q, args...)
}

func (e *explainer) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := e.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return nil, err
	}
	x := storetest.Explained{Query: q}
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			rows.Close()
			return nil, err
		}
		x.Plan = append(x.Plan, detail)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	e.got = append(e.got, x)
	return e.db.QueryContext(ctx, q, args...)
}

// Every documented filter of the large lists reads through the index that matches it, with the
// statistics of an empty store and then with those PRAGMA optimize gathers from 11,000
// invocations: a change to a list's SQL, its indexes or the statistics upkeep that makes SQLite
// walk a tenant's whole history fails here.
func TestListPlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "lark.db"), Options{})
	require.NoError(t, err)
	defer s.Close()
	total := scalefill.Total(10_000)
	_, err = s.w.ExecContext(ctx, scalefill.SQLite.Insert(storetest.PlanTenant, total, time.Now().Add(-time.Hour)), 0, total)
	require.NoError(t, err)
	checkPlans(t, s, "statistics of the empty store")

	require.NoError(t, optimize(ctx, s.w))
	var rows int64
	require.NoError(t, s.w.QueryRowContext(ctx, `SELECT CAST(stat AS INTEGER) FROM sqlite_stat1
		WHERE idx = 'invocations_tenant_status_created'`).Scan(&rows))
	require.Greater(t, rows, int64(total/2), "optimize did not refresh the statistics of a grown table")
	checkPlans(t, s, "statistics of the filled store")
}

func checkPlans(t *testing.T, s *Store, state string) {
	for _, p := range storetest.ListPlans() {
		e := &explainer{db: s.rdb}
		r := &sqlcore.Reader{Q: e, D: dialect{}}
		require.NoError(t, p.List(context.Background(), r), "%s: %s", state, p.Name)
		if why := storetest.CheckSQLitePlan(p, e.got); why != "" {
			for _, x := range e.got {
				t.Logf("%s\n  %v", x.Query, x.Plan)
			}
			t.Errorf("%s: %s: %s", state, p.Name, why)
		}
	}
}

// Opening a store gathers the statistics of a table that grew since they were last gathered (the
// server's start after an upgrade or a bulk load).
func TestOpenRefreshesStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lark.db")
	s, err := OpenSQLite(ctx, path, Options{})
	require.NoError(t, err)
	total := scalefill.Total(10_000)
	_, err = s.w.ExecContext(ctx, scalefill.SQLite.Insert(storetest.PlanTenant, total, time.Now()), 0, total)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = OpenSQLite(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	var rows int64
	require.NoError(t, s.w.QueryRowContext(ctx, `SELECT CAST(stat AS INTEGER) FROM sqlite_stat1
		WHERE idx = 'invocations_tenant_status_created'`).Scan(&rows))
	require.Equal(t, int64(total), rows, "the statistics count the rows written since the last open")
}
