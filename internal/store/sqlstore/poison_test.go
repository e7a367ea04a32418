package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
)

// TestMalformedTagsRowDoesNotFailLists: an entrypoint row whose tags SQLite's JSON functions cannot
// parse (written around the API) matches no tags filter, and the list still answers the others.
func TestMalformedTagsRowDoesNotFailLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lark.db")
	s, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	require.NoError(t, err)
	defer s.Close()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"ep_good", "ep_bad"} {
			e := storetest.NewEntrypoint(id, "acme", entrypoint.OwnerTenant, "acme", id, 1, 0, false, t0)
			e.Tags = []string{"billing"}
			if err := tx.InsertEntrypoint(e); err != nil {
				return err
			}
		}
		return nil
	}))
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE entrypoints SET tags = '["billing"' WHERE id = 'ep_bad'`)
	require.NoError(t, err)

	f, err := odata.ParseFilter("tags eq 'billing'")
	require.NoError(t, err)
	page, err := s.ListEntrypoints(ctx, entrypoint.Viewer{TenantID: "acme", SubjectID: "u"}, store.ListQuery{Limit: 10, Filter: f})
	require.NoError(t, err)
	var ids []string
	for _, e := range page.Items {
		ids = append(ids, e.ID)
	}
	require.Equal(t, []string{"ep_good"}, ids)
}
