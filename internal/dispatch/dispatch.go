// Package dispatch is the in-process dispatcher: it claims runnable invocations from the store's
// queue (each claim takes a lease), runs them on a bounded pool, and sleeps until new work is
// signalled, the next retry or lease expiry falls due, or a poll interval passes. Work held by a
// process that dies is reclaimed by the next one once its lease expires.
package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/invoke"
)

// Source is where jobs come from (invoke.Service).
type Source interface {
	Claim(ctx context.Context, limit int) ([]invoke.Job, error)
	NextDue(ctx context.Context) (*time.Time, error)
	Purge(ctx context.Context) error
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
	Clock      clock.Clock
	Logger     *slog.Logger
}

// Dispatcher runs claimed work.
type Dispatcher struct {
	src  Source
	o    Options
	wake chan struct{}
	sem  chan struct{}
	wg   sync.WaitGroup
}

// New returns a Dispatcher.
func New(src Source, o Options) *Dispatcher {
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
	return &Dispatcher{src: src, o: o, wake: make(chan struct{}, 1), sem: make(chan struct{}, o.Slots)}
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
	lastPurge := time.Now()
	for ctx.Err() == nil {
		free := d.o.Slots - len(d.sem)
		claimed := 0
		if free > 0 {
			jobs, err := d.src.Claim(ctx, free)
			if err != nil && ctx.Err() == nil {
				d.o.Logger.Error("dispatch: claim failed", "err", err)
			}
			claimed = len(jobs)
			for _, j := range jobs {
				d.sem <- struct{}{}
				d.wg.Add(1)
				go func() {
					defer func() {
						if r := recover(); r != nil {
							d.o.Logger.Error("dispatch: job panicked", "panic", r)
						}
						<-d.sem
						d.wg.Done()
						d.Wake()
					}()
					j(context.WithoutCancel(ctx))
				}()
			}
		}
		if time.Since(lastPurge) >= d.o.PurgeEvery {
			lastPurge = time.Now()
			if err := d.src.Purge(ctx); err != nil && ctx.Err() == nil {
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

// sleep waits for a wake-up, the next due time, or the poll interval.
func (d *Dispatcher) sleep(ctx context.Context) {
	wait := d.o.Poll
	if due, err := d.src.NextDue(ctx); err == nil && due != nil {
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
