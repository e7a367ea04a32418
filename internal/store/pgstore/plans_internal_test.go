package pgstore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/store/scalefill"
	"github.com/larkrun/lark/internal/store/sqlcore"
	"github.com/larkrun/lark/internal/store/storetest"
)

// explainer is a Querier (? placeholders, as the shared SQL writes them) that records
// PostgreSQL's plan of every query before running it, on one connection.
type explainer struct {
	conn *sql.Conn
	got  []storetest.Explained
}

func (e *explainer) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return e.conn.ExecContext(ctx, rebind(q), args...)
}

func (e *explainer) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return e.conn.QueryRowContext(ctx, rebind(q), args...)
}

func (e *explainer) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := e.conn.QueryContext(ctx, "EXPLAIN "+rebind(q), args...)
	if err != nil {
		return nil, err
	}
	x := storetest.Explained{Query: q}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return nil, err
		}
		x.Plan = append(x.Plan, line)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	e.got = append(e.got, x)
	return e.conn.QueryContext(ctx, rebind(q), args...)
}

// Every documented filter of the large lists reads through the index that matches it on
// PostgreSQL too, with the statistics ANALYZE gathers from 11,000 invocations and 10,000 audit
// events (sequential and bitmap scans off: see below).
func TestListPlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, pgtest.Schema(t), Options{MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()
	total := scalefill.Total(10_000)
	_, err = s.pool.Exec(ctx, scalefill.Postgres.Insert(storetest.PlanTenant, total, time.Now().Add(-time.Hour)), 0, total)
	require.NoError(t, err)
	// Audit events, half of them the plan tenant's: on an empty table every index costs the same.
	_, err = s.pool.Exec(ctx, `INSERT INTO audit_events (id, tenant_id, type, actor_id, resource_type, resource_id, correlation_id, at)
		SELECT 'aud_' || i, CASE WHEN i % 2 = 0 THEN '`+storetest.PlanTenant+`' ELSE 't' || (i % 7) END, 'type' || (i % 20),
		  'actor' || (i % 50), 'res' || (i % 5), 'r' || (i % 1000), 'c' || i,
		  to_char(timestamp '2026-01-01' + i * interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
		FROM generate_series(1, 10000) AS i`)
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, "ANALYZE")
	require.NoError(t, err)
	conn, err := s.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	// The other lists' tables are empty, where reading the table is the right plan, and at 11,000
	// rows a bitmap scan (which reads out of order, then sorts) is as cheap as any: the test asks
	// which index PostgreSQL would walk in the list's order instead.
	for _, set := range []string{"SET enable_seqscan = off", "SET enable_bitmapscan = off"} {
		_, err = conn.ExecContext(ctx, set)
		require.NoError(t, err)
	}
	for _, p := range storetest.ListPlans() {
		e := &explainer{conn: conn}
		require.NoError(t, p.List(ctx, &sqlcore.Reader{Q: e, D: dialect{}}), p.Name)
		if why := storetest.CheckPostgresPlan(p, e.got); why != "" {
			for _, x := range e.got {
				t.Logf("%s\n  %s", x.Query, strings.Join(x.Plan, "\n  "))
			}
			t.Errorf("%s: %s", p.Name, why)
		}
	}
}
