package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/audit"
	"github.com/larkrun/lark/internal/store"
)

// TestAuditAppendOnly: the database itself refuses to change an audit event (the trigger of
// migration 00006); the retention purge deletes old ones.
func TestAuditAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "lark.db"), Options{})
	require.NoError(t, err)
	defer s.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		return tx.InsertAudit(audit.Event{ID: "aud_1", TenantID: "acme", Type: audit.TokenCreated, ActorID: "admin",
			ResourceType: "token", ResourceID: "tok_1", At: at})
	}))
	err = s.Update(ctx, func(stx store.Tx) error {
		_, err := stx.(*tx).t.ExecContext(bg, "UPDATE audit_events SET actor_id = 'mallory' WHERE id = 'aud_1'")
		return err
	})
	require.ErrorContains(t, err, "audit_events is append-only")
	page, err := s.ListAudit(ctx, "acme", store.ListQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, "admin", page.Items[0].ActorID, "the event is unchanged")

	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		n, err := tx.PurgeAudit("acme", at.Add(time.Second), 10)
		require.EqualValues(t, 1, n)
		return err
	}))
	page, err = s.ListAudit(ctx, "acme", store.ListQuery{})
	require.NoError(t, err)
	require.Empty(t, page.Items)
}
