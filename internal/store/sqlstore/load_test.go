package sqlstore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store/sqlcore"
)

// TestTenantLoadsUseIndexes: the scrape-time queries never walk the whole invocations table (or an
// index over all of it): their cost follows the queue, the leases, the tenants and the work in
// flight, not the history kept.
func TestTenantLoadsUseIndexes(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "lark.db"), Options{})
	require.NoError(t, err)
	defer s.Close()
	for _, q := range []struct {
		query string
		args  []any
	}{{loadQueueQuery, []any{"x"}}, {sqlcore.LoadLeasesQuery, []any{"x"}}, {sqlcore.LoadInFlightQuery, nil}} {
		rows, err := s.rdb.Query("EXPLAIN QUERY PLAN "+q.query, q.args...)
		require.NoError(t, err)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Err())
		rows.Close()
		all := strings.Join(plan, "\n")
		require.NotRegexp(t, `SCAN (invocations|i)\b`, all, "%s\nplan:\n%s", q.query, all)
		require.Contains(t, all, "SEARCH", "%s\nplan:\n%s", q.query, all)
	}
}
