package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/cutproxy"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
)

// TestPartitionFailsFast: with PostgreSQL behind a partition (connections open, nothing answered),
// reads and writes under way and new ones fail with store.ErrUnavailable within the client
// timeout's bound instead of waiting for the partition to end; the LISTEN connection notices the
// silence and fails too; a write made to outlast outages goes on retrying through it; once the
// partition heals, that write is applied, and reads, writes and a new LISTEN work again without a
// restart.
func TestPartitionFailsFast(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.Schema(t))
	require.NoError(t, err)
	px := cutproxy.New(t, u.Host)
	u.Host = px.Addr()
	const clientTimeout = time.Second
	s, err := pgstore.Open(context.Background(), u.String(), pgstore.Options{MaxConns: 4, ClientTimeout: clientTimeout,
		TCPTimeout: 2 * time.Second, QueueVacuum: -1})
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
	read := func() error { _, err := s.CountTenantTriggers(ctx, "acme"); return err }
	require.NoError(t, s.Update(ctx, put("before")))
	require.NoError(t, read())
	listened := make(chan error, 1)
	listening := make(chan struct{})
	go func() { listened <- s.Listen(ctx, func() { close(listening) }, func(string) {}) }()
	<-listening

	// The bound of one operation: the batch in front of a write and its own, plus slack for a
	// loaded machine. Without client-side deadlines each of them waits for the partition's end.
	const bound = 2*clientTimeout + 3*time.Second
	px.Blackhole()
	type answer struct {
		err  error
		took time.Duration
	}
	ops := []func() error{
		func() error { return s.Update(ctx, put("during1")) },
		func() error { return s.Update(ctx, put("during2")) },
		read, read,
	}
	outlasted := make(chan error, 1)
	go func() { outlasted <- s.Update(store.OutlastOutages(ctx, time.Minute), put("outlasted")) }()
	answers := make(chan answer, len(ops))
	for _, op := range ops {
		go func() {
			began := time.Now()
			err := op()
			answers <- answer{err, time.Since(began)}
		}()
	}
	for range ops {
		select {
		case a := <-answers:
			require.Error(t, a.err)
			require.True(t, store.IsUnavailable(a.err), "%v", a.err)
			require.Less(t, a.took, bound, "answered after %v", a.took)
		case <-time.After(bound + 5*time.Second):
			px.Restore() // let the stuck operations end before the store is closed
			t.Fatal("an operation under way waited on the partition")
		}
	}
	// A new request, once the pool's connections are known dead, fails within the bound too.
	began := time.Now()
	require.ErrorIs(t, s.Update(ctx, put("later")), store.ErrUnavailable)
	require.Less(t, time.Since(began), bound)
	select {
	case err := <-listened:
		require.Error(t, err, "the listener gave up on the silent connection")
	case <-time.After(2*time.Second + clientTimeout + 10*time.Second):
		t.Fatal("the listener waited on a silent connection")
	}

	px.Restore()
	// Each try writes a key of its own: a try whose write succeeded (or committed after its client
	// gave up) while its read failed must not make the next try a conflict.
	tries := 0
	require.Eventually(t, func() bool {
		tries++
		return s.Update(ctx, put(fmt.Sprintf("after%d", tries))) == nil && read() == nil
	}, 30*time.Second, 50*time.Millisecond, "writes and reads work again once the partition heals")
	select {
	case err := <-outlasted:
		require.NoError(t, err, "a write made to outlast outages outlasts the partition")
	case <-time.After(30 * time.Second):
		t.Fatal("the outlasting write did not complete after the partition healed")
	}
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		got, err := tx.IdempotencyKey(store.IdempotencyKeyQuery{TenantID: "acme", Scope: "s", Key: "outlasted", Now: t0})
		require.NoError(t, err)
		require.Equal(t, "inv_outlasted", got.InvocationID)
		return nil
	}))
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan string, 1)
	again := make(chan struct{})
	go func() {
		_ = s.Listen(lctx, func() { close(again) }, func(p string) {
			select {
			case got <- p:
			default:
			}
		})
	}()
	select {
	case <-again:
	case <-time.After(30 * time.Second):
		t.Fatal("no LISTEN after the partition healed")
	}
	require.NoError(t, s.Notify(ctx, "back"))
	select {
	case p := <-got:
		require.Equal(t, "back", p)
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after the partition healed")
	}
}
