package leader_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/leader"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/store/pgstore"
	"github.com/larkrun/lark/internal/store/pgstore/pgtest"
	"github.com/larkrun/lark/internal/store/sqlstore"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "lark.db"), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// TestFailoverBound: the leader dies right after a renewal (it stops claiming); another node, claiming
// every Renew period on the fake clock, leads within TTL + Renew of that renewal, and not before the
// lease expired.
func TestFailoverBound(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	clk := clock.NewFake(t0)
	ttl, renew := 9*time.Second, 3*time.Second
	a := leader.New(st, leader.Options{Holder: "a", TTL: ttl, Renew: renew, Clock: clk})
	b := leader.New(st, leader.Options{Holder: "b", TTL: ttl, Renew: renew, Clock: clk})
	require.Equal(t, ttl+renew, a.Bound())

	require.True(t, a.Tick(ctx))
	require.False(t, b.Tick(ctx))
	// a renews for a while; b keeps failing to take it.
	for range 5 {
		clk.Advance(renew)
		require.True(t, a.Tick(ctx))
		require.False(t, b.Tick(ctx))
	}
	lastRenewal := clk.Now()
	term := a.Term()
	// a is killed: it claims no more. b claims every renew period, its phase shifted by 1 s.
	clk.Advance(time.Second)
	for !b.Tick(ctx) {
		require.Less(t, clk.Now().Sub(lastRenewal), ttl, "b failed to take an expired lease")
		clk.Advance(renew)
	}
	took := clk.Now().Sub(lastRenewal)
	require.GreaterOrEqual(t, took, ttl, "b led while a's lease was live")
	require.LessOrEqual(t, took, a.Bound(), "failover exceeded TTL + Renew")
	require.Equal(t, term+1, b.Term())

	// a comes back (a paused process, not a dead one): its renewal fails, and it stops leading.
	require.False(t, a.Tick(ctx))
	require.False(t, a.Leading())
	require.True(t, b.Leading())
}

// TestReleaseHandsOver: a node that stops cleanly releases the lease; the next claim of another takes
// it at once.
func TestReleaseHandsOver(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	clk := clock.NewFake(t0)
	a := leader.New(st, leader.Options{Holder: "a", Clock: clk})
	b := leader.New(st, leader.Options{Holder: "b", Clock: clk})
	require.True(t, a.Tick(ctx))
	require.False(t, b.Tick(ctx))
	require.NoError(t, a.Release(ctx))
	require.False(t, a.Leading())
	require.True(t, b.Tick(ctx))
}

// failing is a store whose writes fail while broken is set.
type failing struct {
	store.Store
	mu     sync.Mutex
	broken bool
}

func (f *failing) Update(ctx context.Context, fn func(store.Tx) error) error {
	f.mu.Lock()
	broken := f.broken
	f.mu.Unlock()
	if broken {
		return errors.New("database unreachable")
	}
	return f.Store.Update(ctx, fn)
}

// TestStepsDownBeforeExpiry: a leader that cannot reach the store keeps leading only while its next
// claim would come before the expiry it wrote, so it has stopped before another node can take over.
func TestStepsDownBeforeExpiry(t *testing.T) {
	ctx := context.Background()
	st := &failing{Store: openSQLite(t)}
	clk := clock.NewFake(t0)
	ttl, renew := 9*time.Second, 3*time.Second
	a := leader.New(st, leader.Options{Holder: "a", TTL: ttl, Renew: renew, Clock: clk})
	require.True(t, a.Tick(ctx))
	st.mu.Lock()
	st.broken = true
	st.mu.Unlock()
	clk.Advance(renew)
	require.True(t, a.Tick(ctx), "one failed renewal with time to spare keeps the lead")
	clk.Advance(renew)
	require.False(t, a.Tick(ctx), "the next claim would come at the expiry: step down now")
	require.Less(t, clk.Now().Sub(t0), ttl)
}

// TestRunStartsAndStopsLead: Run starts lead while leading and cancels it, waiting for it, when the
// lease is lost; it releases the lease when its context ends.
func TestRunStartsAndStopsLead(t *testing.T) {
	st := openSQLite(t)
	clk := clock.NewFake(t0)
	ttl, renew := 300*time.Millisecond, 20*time.Millisecond
	a := leader.New(st, leader.Options{Holder: "a", TTL: ttl, Renew: renew, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	started, stopped := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		a.Run(ctx, func(lctx context.Context) {
			close(started)
			<-lctx.Done()
			close(stopped)
		})
		close(done)
	}()
	waitFor(t, started, "lead to start")
	// Another node steals the lease after a's expires (a's clock jumps past it, as if paused).
	clk.Advance(time.Hour)
	require.NoError(t, st.Update(context.Background(), func(x store.Tx) error {
		_, err := x.ClaimLeaderLease(store.LeaderClaim{Name: leader.DefaultName, Holder: "b", Now: clk.Now(), ExpiresAt: clk.Now().Add(time.Hour)})
		return err
	}))
	waitFor(t, stopped, "lead to stop after the lease was lost")
	cancel()
	waitFor(t, done, "Run to return")
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for " + what)
	}
}

// TestOneLeaderAcrossProcesses: four nodes, each on its own PostgreSQL connection pool (as four
// processes), claim the lease concurrently round after round on a shared clock: each round exactly
// one leads.
func TestOneLeaderAcrossProcesses(t *testing.T) {
	url := pgtest.Schema(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	var els []*leader.Elector
	for i := range 4 {
		s, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 2})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		els = append(els, leader.New(s, leader.Options{Holder: string(rune('a' + i)), TTL: 3 * time.Second, Renew: time.Second, Clock: clk}))
	}
	for round := range 20 {
		var wg sync.WaitGroup
		leads := make([]bool, len(els))
		for i, e := range els {
			wg.Add(1)
			go func() { defer wg.Done(); leads[i] = e.Tick(ctx) }()
		}
		wg.Wait()
		n := 0
		for _, l := range leads {
			if l {
				n++
			}
		}
		require.Equal(t, 1, n, "round %d: %v", round, leads)
		// Every few rounds the leader releases, so the lease changes hands under contention.
		if round%4 == 3 {
			for i, l := range leads {
				if l {
					require.NoError(t, els[i].Release(ctx))
				}
			}
		}
		clk.Advance(time.Second)
	}
}
