package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

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
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

// TestOneProcessPerFile: the embedded database is locked while open, so a second store on the same
// file fails clearly, and closing the first releases it.
func TestOneProcessPerFile(t *testing.T) {
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
