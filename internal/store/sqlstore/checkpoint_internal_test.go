package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The checkpointer copies committed frames after the writer's batches, without errors.
func TestCheckpointerRunsAfterBatches(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "lark.db"), Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.gc.Do(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(context.Background(), "CREATE TABLE scratch (n INTEGER)")
		return err
	}))
	deadline := time.Now().Add(5 * time.Second)
	for s.ckpt.runs.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "no checkpoint after a committed batch")
		time.Sleep(time.Millisecond)
	}
	require.Zero(t, s.ckpt.failed.Load(), "checkpoints failed")
}
