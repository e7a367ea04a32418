// Package dispatch is the in-process dispatcher: it claims runnable attempts through a Claimer
// (each claim takes a lease and comes back as data, an attempt.Attempt), hands them to a Runner on
// a bounded pool, and sleeps until new work is signalled, the next retry or lease expiry falls due,
// or a poll interval passes. Work held by a process that dies is reclaimed by the next one once its
// lease expires.
//
// The dispatcher is a stage between two others and knows neither: it moves attempt values from the
// claim to the run. The claim stage is in this package too (StoreClaimer, claim.go): it reads the
// store's queue and takes leases, learning what it must of tenants and entrypoint versions through
// a Catalog, and never calls the service above it. The Runner is execution.Executor
// (invoke.Service.Runner), which may hand a function attempt on to a remote worker.
package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/store"
)

// Claimer is where attempts come from (StoreClaimer): the store's queue seen through its leases.
type Claimer interface {
	// Claim leases at most limit runnable attempts to this process and returns them.
	Claim(ctx context.Context, limit int) ([]attempt.Attempt, error)
	// NextDue is when queued work or a lease expiry next falls due, or nil if nothing is waiting.
	NextDue(ctx context.Context) (*time.Time, error)
	// Purge deletes expired idempotency keys and cache entries.
	Purge(ctx context.Context) error
}

// Runner runs one claimed attempt to its end and records its outcome (execution.Executor). Errors
// are its own to log: an attempt whose outcome is not recorded keeps its lease and is reclaimed
// once the lease expires.
type Runner interface {
	Run(ctx context.Context, a attempt.Attempt)
}

// Options tune a Dispatcher.
type Options struct {
	// Slots bounds concurrent executions (default 64).
	Slots int
	// Poll is the longest sleep between claim attempts (default 1 s): a safety net for other
	// processes' writes, which send no wake-up.
	Poll time.Duration
	// PurgeEvery is how often expired idempotency keys and cache entries are deleted (default 1 min).
	PurgeEvery time.Duration
	// Clock tells the time against which NextDue and PurgeEvery are measured (default clock.Real):
	// the Claimer's clock, so that a due time it reports is compared with its own "now".
	Clock clock.Clock
	// Logger receives claim and purge failures and runner panics (default slog.Default()).
	Logger *slog.Logger
}

// Dispatcher moves claimed attempts from a Claimer to a Runner.
type Dispatcher struct {
	claimer Claimer
	runner  Runner
	o       Options
	wake    chan struct{}
	sem     chan struct{}
	wg      sync.WaitGroup
}

// New returns a Dispatcher that claims from c and runs on r.
func New(c Claimer, r Runner, o Options) *Dispatcher {
	if o.Slots <= 0 {
		o.Slots = 64
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.PurgeEvery <= 0 {
		o.PurgeEvery = time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Dispatcher{claimer: c, runner: r, o: o, wake: make(chan struct{}, 1), sem: make(chan struct{}, o.Slots)}
}

// Wake asks the dispatcher to look for work now. It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run claims and runs work until ctx ends, then waits for running attempts to finish. Attempts are
// bounded by their own timeouts; the context they run with is not canceled by shutdown, so an
// accepted attempt finishes and records its outcome (an attempt cut short by a hard kill keeps its
// lease and is reclaimed by the next process after the lease expires).
func (d *Dispatcher) Run(ctx context.Context) {
	lastPurge := d.o.Clock.Now()
	for ctx.Err() == nil {
		free := d.o.Slots - len(d.sem)
		claimed := 0
		if free > 0 {
			claimed = d.claim(ctx, free)
		}
		if now := d.o.Clock.Now(); now.Sub(lastPurge) >= d.o.PurgeEvery {
			lastPurge = now
			if err := d.claimer.Purge(ctx); err != nil && ctx.Err() == nil {
				d.o.Logger.Warn("dispatch: purge failed", "err", err)
			}
		}
		if claimed > 0 && claimed == free {
			continue // there may be more: claim again as soon as slots free up
		}
		d.sleep(ctx)
	}
	d.wg.Wait()
}

// claim claims up to free attempts and starts each on a slot of the pool. It returns how many it
// started.
func (d *Dispatcher) claim(ctx context.Context, free int) int {
	as, err := d.claimer.Claim(ctx, free)
	if err != nil && ctx.Err() == nil {
		d.o.Logger.Error("dispatch: claim failed", "err", err)
	}
	for _, a := range as {
		d.sem <- struct{}{} // never blocks while the Claimer keeps to its limit
		d.wg.Add(1)
		go d.run(context.WithoutCancel(ctx), a)
	}
	return len(as)
}

// run runs one attempt on a slot, and frees the slot however the Runner ends.
func (d *Dispatcher) run(ctx context.Context, a attempt.Attempt) {
	defer func() {
		if r := recover(); r != nil {
			d.o.Logger.Error("dispatch: runner panicked", "panic", r,
				"invocation_id", a.Invocation.ID, "tenant_id", a.Invocation.TenantID, "kind", a.Kind)
		}
		<-d.sem
		d.wg.Done()
		d.Wake()
	}()
	// The attempt's writes may run on any of the store's writers (store.AnyWriter): it holds a lease,
	// and its writes check it and the projection they expect, as another process's would.
	d.runner.Run(store.AnyWriter(ctx), a)
}

// sleep waits for a wake-up, the next due time, or the poll interval.
func (d *Dispatcher) sleep(ctx context.Context) {
	wait := d.o.Poll
	due, err := d.claimer.NextDue(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		d.o.Logger.Warn("dispatch: next due time unknown; polling", "err", err)
	case err == nil && due != nil:
		if until := due.Sub(d.o.Clock.Now()); until < wait {
			wait = until
		}
	}
	if wait <= 0 {
		if len(d.sem) < d.o.Slots {
			return
		}
		wait = d.o.Poll
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-d.wake:
	case <-t.C:
	}
}

// Slots reports how many of the pool's execution slots are running claimed work, and the pool's size.
func (d *Dispatcher) Slots() (busy, total int) { return len(d.sem), d.o.Slots }
