package sqlstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlcore"
)

// One batch of closures writes its usage once per row before it commits: what succeeded closures
// gathered is summed, a failed closure's is not, and a projection rebuild in the same batch sees
// (and replaces) what came before it.
func TestUsageIsWrittenOncePerBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "lark.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	hour := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	delta := func(n int64) *sqlcore.UsageDelta {
		return &sqlcore.UsageDelta{TenantID: "acme", EntrypointID: "ep", Hours: []sqlcore.HourUsage{{Hour: hour.Unix() / 3600,
			Usage: invocation.Usage{Invocations: n}}}}
	}
	gather := func(n int64, fail bool) func(store.Tx) error {
		return func(x store.Tx) error {
			require.NoError(t, x.(*tx).WriteUsage(delta(n)))
			if fail {
				return errors.New("the closure fails after gathering")
			}
			return nil
		}
	}
	// The committer is held by a first closure while the others queue, so that they run as one batch.
	release := make(chan struct{})
	held := make(chan struct{})
	first := s.Enqueue(ctx, func(store.Tx) error { close(held); <-release; return nil })
	<-held
	var waits []func() error
	for i := range 10 {
		waits = append(waits, s.Enqueue(ctx, gather(1, i == 3)))
	}
	rebuilt := s.Enqueue(ctx, func(x store.Tx) error {
		rows, err := x.(*tx).UsageRows("acme", hour)
		require.NoError(t, err)
		require.Len(t, rows, 1, "the rebuild sees what the batch gathered before it")
		require.EqualValues(t, 9, rows[0].Usage.Invocations)
		rows[0].Usage.Invocations = 100
		return x.(*tx).ReplaceUsage("acme", hour, rows)
	})
	last := s.Enqueue(ctx, gather(5, false))
	close(release)
	require.NoError(t, first())
	for i, w := range waits {
		if i == 3 {
			require.Error(t, w())
		} else {
			require.NoError(t, w())
		}
	}
	require.NoError(t, rebuilt())
	require.NoError(t, last())
	var n int64
	require.NoError(t, s.rdb.QueryRowContext(ctx, "SELECT invocations FROM usage_hourly WHERE tenant_id = 'acme' AND entrypoint_id = 'ep'").Scan(&n))
	require.EqualValues(t, 105, n, "the rebuilt 100, then the last closure's 5")
}
