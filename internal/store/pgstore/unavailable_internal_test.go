package pgstore

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/groupcommit"
	"github.com/larkrun/lark/internal/store"
)

// A write's final error says store.ErrUnavailable when the database was out of reach or the
// connection was lost, and is left alone otherwise.
func TestUnavailable(t *testing.T) {
	require.NoError(t, unavailable(nil))
	for _, err := range []error{
		fmt.Errorf("exec: %w", pgconn.ErrConnClosed),
		fmt.Errorf("commit: failed to receive message: %w", io.EOF),
		fmt.Errorf("read: %w", io.ErrUnexpectedEOF),
		&pgconn.PgError{Code: "57P01"},
		&pgconn.PgError{Code: "08006"},
		fmt.Errorf("%w: %w", store.ErrUnavailable, groupcommit.ErrBusy),
	} {
		got := unavailable(err)
		require.ErrorIs(t, got, store.ErrUnavailable, "%v", err)
		require.ErrorIs(t, got, err, "the cause stays in the chain")
	}
	for _, err := range []error{store.ErrNotFound, &pgconn.PgError{Code: "23505"}, errors.New("boom")} {
		require.Equal(t, err, unavailable(err), "%v", err)
	}
}
