package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/store/storetest"
)

// openTemp opens a store on a fresh schema (dropped when t ends); the caller closes it.
func openTemp(t testing.TB, o pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgtest.Schema(t), o)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t, pgstore.Options{MaxConns: 4}) })
}
