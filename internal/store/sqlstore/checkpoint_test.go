package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/storetest"
)

// The WAL restarts from its beginning under continuous writes, with the background checkpointer
// copying frames beside the writer: 50 writers appending without pause leave a WAL file of a few
// automatic-checkpoint intervals (1,000 pages each), not one that grows with everything written.
// It stays serial: the bound holds when the checkpointer keeps up, which tests running beside it
// would make a question of scheduling.
func TestWALStaysBoundedUnderContinuousWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 60 MB of WAL frames; skipped with -short")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lark.db")
	s := openAt(t, path)
	defer s.Close()
	const writers, steps = 50, 200
	ids := make([]string, writers)
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		for i := range ids {
			ids[i] = fmt.Sprintf("inv_%03d", i)
			if _, err := tx.StartInvocation([]invocation.Event{storetest.NewInvocationEvent(ids[i], "acme", "ep_1", dt0)}, store.Scheduling{}); err != nil {
				return err
			}
		}
		return nil
	}))
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range steps {
				// A log entry of 2 KB: every append dirties its invocation's pages.
				e := statusEvent(id, invocation.EventLog, fmt.Sprintf(`{"message":%q}`, fmt.Sprintf("%02048d", n)), dt0)
				e.IdempotencyKey = invocation.IdempotencyKey(id, fmt.Sprint("log-", n), 1, invocation.EventLog, "")
				if err := s.Update(ctx, func(tx store.Tx) error {
					_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: id, Events: []invocation.Event{e}})
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	db, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("database %d MiB, WAL %d MiB after %d appends", db.Size()>>20, st.Size()>>20, writers*steps)
	require.Less(t, st.Size(), int64(32<<20), "the WAL restarts: a few checkpoint intervals, not everything written")
}
