package storetest

import (
	"context"
	"errors"
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
