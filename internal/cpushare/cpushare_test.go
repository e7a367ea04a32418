package cpushare

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// granted reports whether ch closes within a second (a turn handed over synchronously by Release
// or Yield closes at once; the deadline only bounds a failing test).
func granted(ch <-chan error) bool {
	select {
	case err := <-ch:
		return err == nil
	case <-time.After(time.Second):
		return false
	}
}

func acquireAsync(s *Scheduler, ctx context.Context, tenant string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Acquire(ctx, tenant) }()
	return ch
}

// waitQueued waits until n executions are queued.
func waitQueued(t *testing.T, s *Scheduler, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.waiting.Load() != n {
		require.True(t, time.Now().Before(deadline), "expected %d queued, have %d", n, s.waiting.Load())
		time.Sleep(time.Millisecond)
	}
}

func TestSlotsAreLimited(t *testing.T) {
	ctx := context.Background()
	s := New(2)
	require.NoError(t, s.Acquire(ctx, "a"))
	require.NoError(t, s.Acquire(ctx, "a"))
	third := acquireAsync(s, ctx, "a")
	waitQueued(t, s, 1)
	s.Release()
	require.True(t, granted(third), "a released slot goes to the waiting execution")
	s.Release()
	s.Release()
	require.Equal(t, 2, s.free)
}

func TestYieldServesOtherTenantsFirst(t *testing.T) {
	ctx := context.Background()
	s := New(1)
	require.NoError(t, s.Acquire(ctx, "a")) // a's CPU hog holds the only slot
	a2 := acquireAsync(s, ctx, "a")         // more of a's executions wait
	waitQueued(t, s, 1)
	a3 := acquireAsync(s, ctx, "a")
	waitQueued(t, s, 2)
	b := acquireAsync(s, ctx, "b") // then b's small call arrives
	waitQueued(t, s, 3)

	yielded := make(chan error, 1)
	go func() { yielded <- s.Yield(ctx, "a") }() // the hog's quantum ends
	require.True(t, granted(b), "b runs at the hog's next yield, ahead of a's queue")
	s.Release() // b's call ends
	require.True(t, granted(a2), "then a's executions, in order")
	s.Release()
	require.True(t, granted(a3))
	s.Release()
	require.True(t, granted(yielded), "the hog gets its turn back")
	s.Release()
	require.Equal(t, 1, s.free)
	require.Zero(t, s.waiting.Load())
}

func TestRoundRobinBetweenTenants(t *testing.T) {
	ctx := context.Background()
	s := New(1)
	require.NoError(t, s.Acquire(ctx, "x"))
	var order []string
	var turns []<-chan error
	for _, tenant := range []string{"a", "a", "a", "b", "c", "b"} {
		turns = append(turns, acquireAsync(s, ctx, tenant))
		waitQueued(t, s, int64(len(turns)))
		order = append(order, tenant)
	}
	// Queued: a a a b c b. Served: a b c a b a (one tenant at a time, each tenant in order).
	want := []int{0, 3, 4, 1, 5, 2}
	for _, i := range want {
		s.Release()
		require.True(t, granted(turns[i]), "turn %d (%s)", i, order[i])
	}
	s.Release()
	require.Equal(t, 1, s.free)
}

func TestAcquireGivesUpWithItsContext(t *testing.T) {
	s := New(1)
	require.NoError(t, s.Acquire(context.Background(), "a"))
	ctx, cancel := context.WithCancel(context.Background())
	b := acquireAsync(s, ctx, "b")
	waitQueued(t, s, 1)
	cancel()
	select {
	case err := <-b:
		require.True(t, errors.Is(err, context.Canceled))
	case <-time.After(5 * time.Second):
		require.FailNow(t, "Acquire did not return when its context ended")
	}
	require.Zero(t, s.waiting.Load())
	s.Release()
	require.Equal(t, 1, s.free, "nothing holds a slot")
}

func TestYieldWithoutWaitersKeepsTheSlot(t *testing.T) {
	s := New(1)
	require.NoError(t, s.Acquire(context.Background(), "a"))
	require.NoError(t, s.Yield(context.Background(), "a"))
	require.Zero(t, s.free, "still held")
	s.Release()
	require.Equal(t, 1, s.free)
}

func TestNilSchedulerSchedulesNothing(t *testing.T) {
	var s *Scheduler
	require.NoError(t, s.Acquire(context.Background(), "a"))
	require.NoError(t, s.Yield(context.Background(), "a"))
	s.Release()
}
