package store_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/store"
)

type sqlStateErr string

func (e sqlStateErr) Error() string    { return "pg error " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

func TestIsUnavailable(t *testing.T) {
	for _, err := range []error{
		store.ErrUnavailable,
		fmt.Errorf("write: %w", store.ErrUnavailable),
		fmt.Errorf("query: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}),
		fmt.Errorf("query: %w", sqlStateErr("57P01")),
		sqlStateErr("08006"),
		sqlStateErr("57014"),
		sqlStateErr("53300"),
	} {
		require.True(t, store.IsUnavailable(err), "%v", err)
	}
	for _, err := range []error{nil, store.ErrNotFound, errors.New("boom"), sqlStateErr("23505"), sqlStateErr("40001")} {
		require.False(t, store.IsUnavailable(err), "%v", err)
	}
}
