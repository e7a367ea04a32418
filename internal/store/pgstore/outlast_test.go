package pgstore_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/cutproxy"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// TestOutlastOutages: with PostgreSQL out of reach, a write gives up after the retry policy's few
// attempts (store.ErrUnavailable); one made with store.OutlastOutages goes on retrying and is
// applied once PostgreSQL is back, and gives up too when its bound or its context ends first.
func TestOutlastOutages(t *testing.T) {
	u, err := url.Parse(pgtest.Schema(t))
	require.NoError(t, err)
	px := cutproxy.New(t, u.Host)
	u.Host = px.Addr()
	s, err := pgstore.Open(context.Background(), u.String(), pgstore.Options{MaxConns: 4,
		Retry: pgstore.RetryPolicy{Attempts: 3, Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(key string) func(store.Tx) error {
		return func(tx store.Tx) error {
			return tx.PutIdempotencyKey(store.IdempotencyRecord{TenantID: "acme", Scope: "s", Key: key, RequestHash: "h",
				InvocationID: "inv_" + key, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
		}
	}

	px.Cut()
	require.ErrorIs(t, s.Update(ctx, put("plain")), store.ErrUnavailable, "without the option: the policy's three attempts")

	bounded := s.Update(store.OutlastOutages(ctx, 100*time.Millisecond), put("bounded"))
	require.ErrorIs(t, bounded, store.ErrUnavailable, "past its bound it gives up")

	ended, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	require.Error(t, s.Update(store.OutlastOutages(ended, time.Minute), put("ended")), "its context ended: it gives up")
	require.Less(t, time.Since(began), 10*time.Second, "when its context ends, not after its minute")

	retries := s.RetryStats()
	done := make(chan error, 1)
	go func() { done <- s.Update(store.OutlastOutages(ctx, time.Minute), put("outlasted")) }()
	require.Eventually(t, func() bool { return s.RetryStats() >= retries+10 }, 30*time.Second, 5*time.Millisecond,
		"still retrying well past the policy's attempts")
	select {
	case err := <-done:
		t.Fatalf("gave up while PostgreSQL was away: %v", err)
	default:
	}
	px.Restore()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not complete after PostgreSQL came back")
	}
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		got, err := tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "outlasted", Now: t0})
		require.NoError(t, err)
		require.Equal(t, "inv_outlasted", got.InvocationID)
		return nil
	}))
}
