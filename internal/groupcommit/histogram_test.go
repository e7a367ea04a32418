package groupcommit_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/groupcommit"
)

// TestHistograms: every committed transaction is observed once, with the closures it applied
// (failed ones are not counted) and its latency; rolled-back batches are not observed.
func TestHistograms(t *testing.T) {
	c := groupcommit.New(openDB(t), groupcommit.Options{})
	defer c.Close()
	ctx := context.Background()
	insert := func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO rows (v) VALUES ('x')`)
		return err
	}
	for range 3 {
		require.NoError(t, c.Do(ctx, insert))
	}
	boom := errors.New("boom")
	require.ErrorIs(t, c.Do(ctx, func(*sql.Tx) error { return boom }), boom) // rolled back: not a commit
	size, latency := c.Histograms()
	batches, writes := c.Stats()
	require.EqualValues(t, batches, size.Count)
	require.EqualValues(t, writes, size.Sum)
	require.EqualValues(t, 3, size.Count, "one commit per sequential write")
	require.EqualValues(t, 3, size.Buckets[1], "each carried one write")
	require.EqualValues(t, 3, size.Buckets[512], "buckets are cumulative")
	require.EqualValues(t, 3, latency.Count)
	require.Greater(t, latency.Sum, 0.0)
	require.Len(t, latency.Buckets, len(groupcommit.LatencyBuckets))
}
