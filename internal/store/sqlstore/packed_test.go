package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
)

// TestLargeDocumentsArePacked: a record and events past sqlcore.PackAt are stored compressed (a
// BLOB a fraction of their size), read back as they were written through every read (the record,
// the event log, a list page), and the SQL function that reads their fields for retention
// answers as json_extract does on text.
func TestLargeDocumentsArePacked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lark.db")
	s, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	params := json.RawMessage(`{"p":"` + strings.Repeat("abc", 100_000) + `"}`)
	result := json.RawMessage(`{"r":"` + strings.Repeat("xyz", 200_000) + `"}`)
	rec := invocation.Record{ID: "inv_big", TenantID: "acme", EntrypointRef: "ep_1", EntrypointID: "gts.x.core.sless.function.v1~x.y.z.f.v1~",
		Mode: invocation.ModeAsync, Params: params, ParentID: "inv_parent", CreatedAt: at}
	created, err := storetest.CreatedEvent(rec)
	require.NoError(t, err)
	succeeded := invocation.Event{Type: invocation.EventSucceeded, Data: json.RawMessage(`{"result":` + string(result) + `}`),
		IdempotencyKey: invocation.IdempotencyKey(rec.ID, "", 1, invocation.EventSucceeded, ""), EngineAttempt: 1, LogicalAttempt: 1, At: at.Add(time.Second)}
	started := invocation.Event{Type: invocation.EventStarted, IdempotencyKey: invocation.IdempotencyKey(rec.ID, "", 1, invocation.EventStarted, ""),
		EngineAttempt: 1, LogicalAttempt: 1, At: at}
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.StartInvocation([]invocation.Event{created}, store.Scheduling{}); err != nil {
			return err
		}
		_, _, err := tx.Append(store.AppendRequest{TenantID: "acme", InvocationID: rec.ID, Events: []invocation.Event{started, succeeded}})
		return err
	}))

	got, err := s.Invocation(ctx, "acme", rec.ID)
	require.NoError(t, err)
	require.Equal(t, invocation.StatusSucceeded, got.Status)
	require.JSONEq(t, string(params), string(got.Params))
	require.JSONEq(t, string(result), string(got.Result))
	log, err := s.Events(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: rec.ID})
	require.NoError(t, err)
	require.Len(t, log, 3)
	require.JSONEq(t, string(created.Data), string(log[0].Data))
	require.JSONEq(t, string(succeeded.Data), string(log[2].Data))
	full, err := s.InvocationLog(ctx, store.EventLogQuery{TenantID: "acme", InvocationID: rec.ID})
	require.NoError(t, err)
	require.Equal(t, log, full)
	ob, err := odata.ParseOrderBy("created_at")
	require.NoError(t, err)
	page, err := s.ListInvocations(ctx, invocation.Viewer{TenantID: "acme", All: true}, store.ListQuery{Limit: 10, OrderBy: ob})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.JSONEq(t, string(result), string(page.Items[0].Result))

	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	var prefix string
	var size int
	require.NoError(t, raw.QueryRow(`SELECT substr(record, 1, 3), length(record) FROM invocations WHERE id = ?`, rec.ID).Scan(&prefix, &size))
	require.Equal(t, "~z:", prefix)
	require.Less(t, size, (len(params)+len(result))/20, "the record is stored compressed")
	var packed int
	require.NoError(t, raw.QueryRow(`SELECT count(*) FROM invocation_events WHERE invocation_id = ? AND data LIKE '~z:%'`, rec.ID).Scan(&packed))
	require.Equal(t, 2, packed, "the created and succeeded events' data are packed, the small started one is not")
	var parent, missing sql.NullString
	require.NoError(t, raw.QueryRow(`SELECT lark_json_field(record, 'parent_id'), lark_json_field(record, 'compensation_for') FROM invocations WHERE id = ?`,
		rec.ID).Scan(&parent, &missing))
	require.Equal(t, "inv_parent", parent.String)
	var docLen int
	require.NoError(t, raw.QueryRow(`SELECT lark_doc_len(record) FROM invocations WHERE id = ?`, rec.ID).Scan(&docLen))
	require.Greater(t, docLen, len(params)+len(result), "the history measurements count a packed record unpacked")
	require.False(t, missing.Valid, "an absent member is NULL")
}
