package writer_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/writer"
)

// newWriter is a Writer over a SQLite store of the test's own, on a fake clock, calling wake (nil:
// none) when it wakes the dispatcher.
func newWriter(t *testing.T, wake func()) (*sqlstore.Store, *clock.Fake, *writer.Writer) {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	return st, c, writer.New(writer.Config{Store: st, Clock: c, Wake: wake})
}

// newRecord is invocation id of tenant acme, created now.
func newRecord(id string, mode invocation.Mode, now time.Time) invocation.Record {
	return invocation.Record{ID: id, TenantID: "acme", EntrypointRef: "ep", EntrypointID: "fn", SubjectID: "bob",
		Mode: mode, Params: json.RawMessage(`{}`), CorrelationID: "corr-" + id, CreatedAt: now, Attempt: 1}
}
