package admission

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// enterAsync enters g in a goroutine; the channel carries the ticket (nil: refused).
func enterAsync(ctx context.Context, g *Gate, tenant string, limit int64) <-chan *Ticket {
	ch := make(chan *Ticket, 1)
	go func() {
		t, _ := g.Enter(ctx, tenant, limit)
		ch <- t
	}()
	return ch
}

// waiting waits until n executions wait for admission.
func waiting(t *testing.T, g *Gate, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for g.Stats().Waiting != n {
		require.True(t, time.Now().Before(deadline), "expected %d waiting, have %+v", n, g.Stats())
		time.Sleep(time.Millisecond)
	}
}

// admitted reports whether ch delivers a ticket within a second (admission hands it over
// synchronously; the deadline bounds only a failing test).
func admitted(ch <-chan *Ticket) *Ticket {
	select {
	case t := <-ch:
		return t
	case <-time.After(time.Second):
		return nil
	}
}

func TestRunnableIsBoundedPerTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := New(Options{Runnable: 1})
	a1, err := g.Enter(ctx, "a", 1<<20)
	require.NoError(t, err)
	a2 := enterAsync(ctx, g, "a", 1<<20)
	waiting(t, g, 1)
	b1, err := g.Enter(ctx, "b", 1<<20)
	require.NoError(t, err, "another tenant is not held by a's bound")
	a1.Leave()
	second := admitted(a2)
	require.NotNil(t, second, "a's next execution starts when its first ends")
	require.Positive(t, second.Waited())
	second.Leave()
	b1.Leave()
	require.Equal(t, Stats{}, g.Stats())
}

func TestBlockedExecutionsDoNotCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := New(Options{Runnable: 1})
	a1, err := g.Enter(ctx, "a", 1<<20)
	require.NoError(t, err)
	a2 := enterAsync(ctx, g, "a", 1<<20)
	waiting(t, g, 1)
	a1.Block() // a1 waits on an HTTP answer: it uses no CPU
	second := admitted(a2)
	require.NotNil(t, second, "an execution waiting on the host leaves its place to the next")
	require.Equal(t, int64(1<<20), g.Stats().Reserved, "a small execution that waits holds no reservation (only the second one's)")
	a1.Unblock() // back without waiting: it was admitted already
	a1.Leave()
	second.Leave()
	require.Equal(t, Stats{}, g.Stats())
}

func TestTenantsAreAdmittedInTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := New(Options{Memory: 8 << 20, Initial: 4 << 20})
	first, err := g.Enter(ctx, "x", 64<<20)
	require.NoError(t, err)
	require.True(t, first.TryGrow(8<<20), "the only execution may take the whole budget")
	var order []string
	chans := map[string][]<-chan *Ticket{}
	for _, tenant := range []string{"a", "a", "a", "b", "b"} {
		chans[tenant] = append(chans[tenant], enterAsync(ctx, g, tenant, 4<<20))
		waiting(t, g, len(chans["a"])+len(chans["b"]))
	}
	first.Leave() // the budget now admits two at a time
	for len(order) < 5 {
		progress := false
		for _, tenant := range []string{"a", "b"} {
			for i, ch := range chans[tenant] {
				select {
				case tk := <-ch:
					order = append(order, tenant)
					chans[tenant] = append(chans[tenant][:i:i], chans[tenant][i+1:]...)
					tk.Leave()
					progress = true
				default:
					continue
				}
				break
			}
		}
		if !progress {
			time.Sleep(time.Millisecond)
		}
	}
	require.ElementsMatch(t, []string{"a", "a", "a", "b", "b"}, order)
	require.Equal(t, Stats{}, g.Stats())
}

func TestMemoryShareWaitsButTheOldestGrows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := New(Options{Memory: 1 << 30, TenantMemory: 64 << 20, Initial: 4 << 20})
	old, err := g.Enter(ctx, "a", 256<<20)
	require.NoError(t, err)
	young, err := g.Enter(ctx, "a", 32<<20)
	require.NoError(t, err)
	require.True(t, young.TryGrow(8<<20), "within the tenant's share")
	require.True(t, young.TryGrow(20<<20), "past BigAt an execution reserves its whole limit: 4 + 32 MiB fit the share")
	require.Equal(t, int64(36<<20), g.Stats().Reserved)
	mid, err := g.Enter(ctx, "a", 48<<20)
	require.NoError(t, err)
	require.False(t, mid.TryGrow(20<<20), "past the tenant's share, a younger execution waits")
	grown := make(chan error, 1)
	go func() { grown <- mid.Grow(ctx, 20<<20) }()
	require.True(t, old.TryGrow(200<<20), "the tenant's oldest execution always grows, up to its own limit")
	other, err := g.Enter(ctx, "b", 256<<20)
	require.NoError(t, err, "another tenant's share is its own")
	require.True(t, other.TryGrow(60<<20))
	old.Leave()
	young.Leave()
	require.NoError(t, <-grown, "memory given back lets the waiting growth through")
	mid.Leave()
	other.Leave()
	require.Equal(t, Stats{}, g.Stats())
}

func TestAGivenUpWaitHoldsNothing(t *testing.T) {
	t.Parallel()
	g := New(Options{Runnable: 1})
	held, err := g.Enter(context.Background(), "a", 1<<20)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = g.Enter(ctx, "a", 1<<20)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 0, g.Stats().Waiting)
	held.Leave()
	require.Equal(t, Stats{}, g.Stats())
}

func TestInsideAnExecutionAdmitsAtOnce(t *testing.T) {
	t.Parallel()
	g := New(Options{Runnable: 1})
	parent, err := g.Enter(context.Background(), "a", 1<<20)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(Inside(context.Background()), time.Second)
	defer cancel()
	child, err := g.Enter(ctx, "a", 1<<20)
	require.NoError(t, err, "a child run while its parent waits must not wait behind the parent")
	child.Leave()
	parent.Leave()
}

func TestAdmittedTicketIsTakenOnce(t *testing.T) {
	t.Parallel()
	g := New(Options{})
	tk, err := g.Enter(context.Background(), "a", 1<<20)
	require.NoError(t, err)
	ctx := Admitted(context.Background(), tk)
	require.Same(t, tk, Take(ctx))
	require.Nil(t, Take(ctx), "taken once")
	require.Nil(t, Take(context.Background()))
	tk.Leave()
}

func TestRoomFollowsWhatCanStart(t *testing.T) {
	t.Parallel()
	var woken atomic.Int32
	g := New(Options{Runnable: 2, OnRoom: func() { woken.Add(1) }})
	require.Equal(t, 2, g.Room("a", 64), "an idle tenant: what can start at once")
	ctx := context.Background()
	t1, _ := g.Enter(ctx, "a", 1<<20)
	t2, _ := g.Enter(ctx, "a", 1<<20)
	w := []<-chan *Ticket{enterAsync(ctx, g, "a", 1<<20), enterAsync(ctx, g, "a", 1<<20)}
	waiting(t, g, 2)
	require.LessOrEqual(t, g.Room("a", 64), 0, "two running and two waiting: claim nothing more")
	t1.Leave()
	require.Equal(t, int32(1), woken.Load(), "the claim is told when there is room again")
	t2.Leave()
	for _, ch := range w {
		admitted(ch).Leave()
	}
	require.Greater(t, g.Room("a", 64), 2, "a tenant whose executions start quickly gets claimed in batches")
	var nilGate *Gate
	require.Equal(t, 64, nilGate.Room("a", 64))
}

func TestIdleTenantsAreForgotten(t *testing.T) {
	t.Parallel()
	g := New(Options{Runnable: 2})
	ctx := context.Background()
	for i := range 4096 {
		tk, err := g.Enter(ctx, fmt.Sprint("t", i), 1<<20)
		require.NoError(t, err)
		tk.Leave()
		if i == 0 {
			g.mu.Lock()
			g.tenants["t0"].rateAt = time.Now().Add(-time.Minute) // idle for a minute
			g.mu.Unlock()
		}
	}
	g.mu.Lock()
	_, kept := g.tenants["t0"]
	n := len(g.tenants)
	g.mu.Unlock()
	require.False(t, kept, "a tenant idle for a minute is forgotten")
	require.Positive(t, n, "tenants active in the last seconds are kept (their admission rates)")
	require.Equal(t, Stats{}, g.Stats())
}
