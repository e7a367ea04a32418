package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store"
)

// testAfterCommit: a transaction's AfterCommit hooks run once it has committed, before Update (or
// the Enqueue's wait) returns, in the order registered; never for a write that was rolled back.
func testAfterCommit(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ran []string
	hook := func(name string) func(store.Tx) error {
		return func(tx store.Tx) error {
			tx.AfterCommit(func() { ran = append(ran, name+"-1") })
			tx.AfterCommit(func() { ran = append(ran, name+"-2") })
			return nil
		}
	}
	require.NoError(t, s.Update(ctx, hook("update")))
	require.Equal(t, []string{"update-1", "update-2"}, ran)

	ran = nil
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		tx.AfterCommit(func() { ran = append(ran, "rolled back") })
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Empty(t, ran, "a rolled-back write runs no hook")

	ran = nil
	wait := s.Enqueue(ctx, hook("enqueue"))
	require.NoError(t, wait())
	require.Equal(t, []string{"enqueue-1", "enqueue-2"}, ran, "the hooks have run when wait returns")
}

// txContextKey keys the value testTxContext puts in a context.
type txContextKey struct{}

// testTxContext: a closure's Tx.Context is the context its Update or Enqueue was called with, also
// when several closures share a group-committed batch.
func testTxContext(t *testing.T, s store.Store) {
	with := func(v string) context.Context { return context.WithValue(context.Background(), txContextKey{}, v) }
	var got any
	require.NoError(t, s.Update(with("update"), func(tx store.Tx) error {
		got = tx.Context().Value(txContextKey{})
		return nil
	}))
	require.Equal(t, "update", got)

	const n = 16
	seen := make([]any, n)
	waits := make([]func() error, n)
	for i := range n {
		waits[i] = s.Enqueue(with(fmt.Sprint(i)), func(tx store.Tx) error {
			seen[i] = tx.Context().Value(txContextKey{})
			return nil
		})
	}
	for i, wait := range waits {
		require.NoError(t, wait())
		require.Equal(t, fmt.Sprint(i), seen[i])
	}
}
