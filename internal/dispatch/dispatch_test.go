package dispatch_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/dispatch"
	"github.com/larkrun/lark/internal/invocation"
)

// TestMain fails the package if a test leaves a goroutine behind (a Run that did not return, a
// runner still running).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a condition; no test sleeps to let something happen.
const waitTimeout = 10 * time.Second

// never is a poll interval no test waits for: a claim that happens was caused by something else.
const never = time.Hour

// claimer is a fake dispatch.Claimer over a queue of attempts. Every call is counted; onClaim, if
// set, sees each claim's limit (under the claimer's lock).
type claimer struct {
	mu      sync.Mutex
	queue   []attempt.Attempt
	limits  []int
	dues    int
	purges  int
	due     *time.Time
	onClaim func(limit int)
}

func (c *claimer) Claim(_ context.Context, limit int) ([]attempt.Attempt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limits = append(c.limits, limit)
	if c.onClaim != nil {
		c.onClaim(limit)
	}
	n := min(limit, len(c.queue))
	out := append([]attempt.Attempt(nil), c.queue[:n]...)
	c.queue = c.queue[n:]
	return out, nil
}

func (c *claimer) NextDue(context.Context) (*time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dues++
	return c.due, nil
}

func (c *claimer) Purge(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.purges++
	return nil
}

// add queues attempts for the next claims.
func (c *claimer) add(as ...attempt.Attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, as...)
}

// snapshot returns the limits of the claims so far, and how many times NextDue and Purge ran.
func (c *claimer) snapshot() (limits []int, dues, purges int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.limits...), c.dues, c.purges
}

func (c *claimer) claims() int { l, _, _ := c.snapshot(); return len(l) }
func (c *claimer) dueCalls() int {
	_, d, _ := c.snapshot()
	return d
}

// runnerFunc adapts a function to dispatch.Runner.
type runnerFunc func(ctx context.Context, a attempt.Attempt)

func (f runnerFunc) Run(ctx context.Context, a attempt.Attempt) { f(ctx, a) }

// attempts returns n attempts to run, inv_1 … inv_n.
func attempts(n int) []attempt.Attempt {
	out := make([]attempt.Attempt, n)
	for i := range out {
		out[i] = attempt.Attempt{Kind: attempt.KindRun, Invocation: invocation.Record{ID: fmt.Sprintf("inv_%d", i+1), TenantID: "acme"}}
	}
	return out
}

// eventually fails the test unless cond holds within waitTimeout.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// start runs d until the test ends and waits for Run to return.
func start(t *testing.T, d *dispatch.Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Error("Run did not return after its context ended")
		}
	})
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestClaimsFreeSlots: each claim asks for the free slots only — all of them at first, then one
// per finished attempt — and none while the pool is full.
func TestClaimsFreeSlots(t *testing.T) {
	const slots = 3
	c := &claimer{queue: attempts(10)}
	release := make(chan struct{})
	var running atomic.Int32
	var ran atomic.Int32
	r := runnerFunc(func(context.Context, attempt.Attempt) {
		running.Add(1)
		<-release
		running.Add(-1)
		ran.Add(1)
	})
	c.onClaim = func(limit int) {
		if n := int(running.Load()); n+limit > slots {
			t.Errorf("claimed %d with %d running on %d slots", limit, n, slots)
		}
	}
	d := dispatch.New(c, r, dispatch.Options{Slots: slots, Poll: never, Logger: quiet()})
	start(t, d)

	eventually(t, func() bool { return running.Load() == slots && c.dueCalls() == 1 }, "a full pool, then a sleep")
	limits, _, _ := c.snapshot()
	require.Equal(t, []int{slots}, limits, "the first claim asks for every slot; a full pool claims nothing")
	busy, total := d.Slots()
	require.Equal(t, slots, busy)
	require.Equal(t, slots, total)

	release <- struct{}{} // one attempt ends: its slot is claimed again, for one attempt
	eventually(t, func() bool { return ran.Load() == 1 && running.Load() == slots && c.dueCalls() == 2 }, "the freed slot refilled")
	limits, _, _ = c.snapshot()
	require.Equal(t, []int{slots, 1}, limits)

	close(release)
	eventually(t, func() bool { return ran.Load() == 10 }, "every attempt run")
}

// TestNeverMoreThanSlots: however attempts end and claims interleave, at most Slots run at once.
func TestNeverMoreThanSlots(t *testing.T) {
	const slots, n = 4, 200
	c := &claimer{queue: attempts(n)}
	var running, peak, ran atomic.Int32
	seen := sync.Map{}
	r := runnerFunc(func(_ context.Context, a attempt.Attempt) {
		now := running.Add(1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		if _, dup := seen.LoadOrStore(a.Invocation.ID, true); dup {
			t.Errorf("%s ran twice", a.Invocation.ID)
		}
		for range 100 {
			time.Sleep(0) // yield: let other attempts and the loop interleave
		}
		running.Add(-1)
		ran.Add(1)
	})
	c.onClaim = func(limit int) {
		if limit < 1 || limit > slots {
			t.Errorf("claim limit %d outside 1..%d", limit, slots)
		}
	}
	d := dispatch.New(c, r, dispatch.Options{Slots: slots, Poll: never, Logger: quiet()})
	start(t, d)
	eventually(t, func() bool { return ran.Load() == n }, "every attempt run")
	require.LessOrEqual(t, peak.Load(), int32(slots))
	eventually(t, func() bool { busy, _ := d.Slots(); return busy == 0 }, "every slot freed")
}

// TestWakeClaimsNow: a wake-up claims at once, long before the poll interval.
func TestWakeClaimsNow(t *testing.T) {
	c := &claimer{}
	ran := make(chan string, 1)
	r := runnerFunc(func(_ context.Context, a attempt.Attempt) { ran <- a.Invocation.ID })
	d := dispatch.New(c, r, dispatch.Options{Poll: never, Logger: quiet()})
	start(t, d)
	eventually(t, func() bool { return c.dueCalls() == 1 }, "the first claim, then a sleep")

	c.add(attempts(1)...)
	d.Wake()
	d.Wake() // never blocks, even with a wake-up pending
	select {
	case id := <-ran:
		require.Equal(t, "inv_1", id)
	case <-time.After(waitTimeout):
		t.Fatal("the wake-up did not claim")
	}
}

// TestSleepsUntilNextDue: with nothing to do, the loop sleeps until the next due time the Claimer
// reports, measured on the injected clock (set years away from the wall clock), not for the poll.
func TestSleepsUntilNextDue(t *testing.T) {
	clk := clock.NewFake(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	const until = 50 * time.Millisecond
	due := clk.Now().Add(until)
	c := &claimer{due: &due}
	claimedAt := make(chan time.Time, 4)
	c.onClaim = func(int) {
		select {
		case claimedAt <- time.Now():
		default:
		}
	}
	d := dispatch.New(c, runnerFunc(func(context.Context, attempt.Attempt) {}), dispatch.Options{Poll: never, Clock: clk, Logger: quiet()})
	start(t, d)
	next := func() time.Time {
		select {
		case at := <-claimedAt:
			return at
		case <-time.After(waitTimeout):
			t.Fatal("no claim at the due time")
			return time.Time{}
		}
	}
	first := next()
	second := next()
	require.GreaterOrEqual(t, second.Sub(first), until, "slept until the due time")
}

// TestDueNowClaimsAgain: work already due (on the injected clock) is claimed again without a sleep
// while slots are free.
func TestDueNowClaimsAgain(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	due := clk.Now().Add(-time.Second)
	c := &claimer{due: &due}
	d := dispatch.New(c, runnerFunc(func(context.Context, attempt.Attempt) {}), dispatch.Options{Poll: never, Clock: clk, Logger: quiet()})
	start(t, d)
	eventually(t, func() bool { return c.claims() >= 3 }, "claims without a wake-up or a poll")
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunnerPanic: a panicking Runner is logged, frees its slot, and the loop goes on.
func TestRunnerPanic(t *testing.T) {
	c := &claimer{queue: attempts(2)}
	var log syncBuffer
	ran := make(chan string, 1)
	r := runnerFunc(func(_ context.Context, a attempt.Attempt) {
		if a.Invocation.ID == "inv_1" {
			panic("boom")
		}
		ran <- a.Invocation.ID
	})
	d := dispatch.New(c, r, dispatch.Options{Slots: 1, Poll: never, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	start(t, d)
	select {
	case id := <-ran:
		require.Equal(t, "inv_2", id, "the only slot ran the next attempt")
	case <-time.After(waitTimeout):
		t.Fatal("the slot of the panicking runner was not freed")
	}
	eventually(t, func() bool { busy, _ := d.Slots(); return busy == 0 }, "the slot freed")
	require.Contains(t, log.String(), "runner panicked")
	require.Contains(t, log.String(), "panic=boom")
	require.Contains(t, log.String(), "invocation_id=inv_1")
}

// TestRunWaitsForRunning: after its context ends, Run claims nothing more and returns only once
// the running attempts have finished; they run on a context that shutdown does not cancel.
func TestRunWaitsForRunning(t *testing.T) {
	c := &claimer{queue: attempts(1)}
	started := make(chan struct{})
	release := make(chan struct{})
	var runErr atomic.Value
	r := runnerFunc(func(ctx context.Context, _ attempt.Attempt) {
		close(started)
		<-release
		runErr.Store(fmt.Sprint(ctx.Err()))
	})
	d := dispatch.New(c, r, dispatch.Options{Poll: never, Logger: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	<-started
	cancel()
	claimsAtCancel := c.claims()
	// A negative can only be checked for a while: Run must still be waiting for the attempt.
	select {
	case <-done:
		t.Fatal("Run returned while an attempt was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return once the attempt finished")
	}
	require.Equal(t, "<nil>", runErr.Load(), "the attempt's context outlives shutdown")
	require.Equal(t, claimsAtCancel, c.claims(), "no claim after the context ended")
}

// TestPurgeEvery: Purge runs once every PurgeEvery on the injected clock, not on every loop.
func TestPurgeEvery(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c := &claimer{}
	d := dispatch.New(c, runnerFunc(func(context.Context, attempt.Attempt) {}),
		dispatch.Options{Poll: never, PurgeEvery: time.Minute, Clock: clk, Logger: quiet()})
	start(t, d)
	// Each loop ends in NextDue, after the purge check: waiting for it waits for the whole loop.
	loop := func() (purges int) {
		t.Helper()
		_, dues, _ := c.snapshot()
		d.Wake()
		eventually(t, func() bool { return c.dueCalls() > dues }, "one more loop")
		_, _, purges = c.snapshot()
		return purges
	}
	eventually(t, func() bool { return c.dueCalls() == 1 }, "the first loop")
	_, _, purges := c.snapshot()
	require.Zero(t, purges, "no purge at start")
	require.Zero(t, loop(), "nor before PurgeEvery")
	clk.Advance(time.Minute)
	require.Equal(t, 1, loop())
	require.Equal(t, 1, loop(), "once per interval")
	clk.Advance(59 * time.Second)
	require.Equal(t, 1, loop())
	clk.Advance(time.Second)
	require.Equal(t, 2, loop())
}
