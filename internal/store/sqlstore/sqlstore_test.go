package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/odata"
	"github.com/larkrun/lark/internal/schedule"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/sqlstore"
	"github.com/larkrun/lark/internal/store/storetest"
)

func openTemp(t testing.TB) *sqlstore.Store {
	s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "lark.db"), sqlstore.Options{})
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

// TestOneProcessPerFile: the embedded database is locked while open, so a second store on the same
// file fails clearly, and closing the first releases it.
func TestOneProcessPerFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lark.db")
	first, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{})
	require.NoError(t, err)
	require.True(t, first.Exclusive())
	_, err = sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{})
	require.ErrorContains(t, err, "another lark process is using this database")
	require.NoError(t, first.Close())
	again, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// TestListOrderNullable: schedules without a next instant (NULL next_run_at) sort first and page
// with a keyset cursor like any other value.
func TestListOrderNullable(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	defer s.Close()
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for i, next := range []*time.Time{&at, nil, &at, nil, nil} {
		sc := &schedule.Schedule{ID: fmt.Sprintf("s%d", i), TenantID: "acme", EntrypointID: "ep", Name: "n",
			Status: schedule.StatusActive, NextRunAt: next, CreatedAt: at, UpdatedAt: at, InputOverrides: json.RawMessage("{}")}
		require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.InsertSchedule(sc) }))
	}
	for order, want := range map[string][]string{
		"next_run_at":      {"s1", "s3", "s4", "s0", "s2"},
		"next_run_at desc": {"s0", "s2", "s1", "s3", "s4"},
	} {
		ob, err := odata.ParseOrderBy(order)
		require.NoError(t, err)
		var got []string
		q := store.ListQuery{Limit: 2, OrderBy: ob}
		for {
			page, err := s.ListSchedules(ctx, "acme", q)
			require.NoError(t, err)
			for _, sc := range page.Items {
				got = append(got, sc.ID)
			}
			if !page.HasMore {
				break
			}
			q.Cursor = page.NextCursor
		}
		require.Equal(t, want, got, order)
	}
}
