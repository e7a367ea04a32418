package invoke

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/entrypoint"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
)

// pendingStart is a sync function call's start (created, started and the lease), held back while
// the function runs. It goes to the committer when the call ends, when it has run for
// Config.SyncStartDelay, or when the function starts a child (whose record must not reach the disk
// before its parent's), whichever comes first; the committer takes it under mu: if the attempt's
// outcome is attached by then, the one write holds the whole invocation.
type pendingStart struct {
	mu    sync.Mutex
	taken bool               // the committer has run the write (it may not have committed yet)
	close []invocation.Event // the outcome's events, attached before the write was taken
	next  store.Scheduling   // the queue state they leave
	final invocation.Record  // the record the merged write left
	start []invocation.Event // created, started
	lease store.Scheduling   // the started attempt's lease

	sendOnce sync.Once
	written  chan struct{} // closed once the write has returned
	err      error         // the write's outcome, once written is closed
}

func newPendingStart(start []invocation.Event, lease store.Scheduling) *pendingStart {
	return &pendingStart{start: start, lease: lease, written: make(chan struct{})}
}

// send hands the write to w, once, on a goroutine of its own (the held-back start's delay passed
// with SyncStartDelay negative: nothing waits for it yet).
func (p *pendingStart) send(ctx context.Context, w updater) {
	p.sendOnce.Do(func() { go p.run(ctx, w) })
}

// sendHere is send on the calling goroutine, which returns once the write has (a time.AfterFunc's
// goroutine, which has nothing else to do).
func (p *pendingStart) sendHere(ctx context.Context, w updater) {
	p.sendOnce.Do(func() { p.run(ctx, w) })
}

// run makes the write and publishes its outcome.
func (p *pendingStart) run(ctx context.Context, w updater) {
	p.err = w.Update(ctx, p.write)
	close(p.written)
}

// durable makes the write if it was not sent yet, on the calling goroutine (a goroutine per call
// would start with a small stack and grow it on every call), and waits for its outcome.
func (p *pendingStart) durable(ctx context.Context, w updater) error {
	p.sendHere(ctx, w)
	<-p.written
	return p.err
}

// updater is the writer's Update.
type updater interface {
	Update(ctx context.Context, fn func(store.Tx) error) error
}

// write is the committer's closure.
func (p *pendingStart) write(tx store.Tx) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.taken = true
	if p.close == nil {
		_, err := tx.StartInvocation(p.start, p.lease)
		return err
	}
	var err error
	p.final, err = tx.StartInvocation(slices.Concat(p.start, p.close), p.next)
	return err
}

// runSync runs the first attempt of a sync function call (no Idempotency-Key, no concurrency quota:
// nothing in its start depends on what else is in the store) and answers with its durable outcome.
// input is its params, decoded (catalog.Catalog.ValidateParams).
//
// One write per call, by construction: the start is held back while the function runs, and a call
// that ends within Config.SyncStartDelay (default 500 ms) is written once, start and outcome
// together (one transaction, one insert of the record, with the whole log: created, started, the
// timeline, the outcome). A longer call's start is written on its own when that delay passes (or
// when it starts a child, which is written after it), so that it can be seen and canceled while
// it runs; its outcome is written after, as usual.
//
// Crash semantics, what is durable when the caller is answered: the whole invocation, always (the
// answer waits for the outcome's write). A crash before the start is durable leaves no trace of
// the call, which the caller sees as a failed request (as with any HTTP call) and can retry; a
// crash after it leaves a running invocation whose lease expires and which is then reclaimed and
// run again, as for every started attempt.
func (s *Service) runSync(ctx context.Context, rec invocation.Record, input any, e entrypoint.Entrypoint, d catalog.Definition, now time.Time) (invocation.Record, error) {
	start, lease, err := s.spawn.StartEvents(rec, d, now)
	if err != nil {
		return rec, err
	}
	started, err := spawn.StartedRecord(start)
	if err != nil {
		return rec, err
	}
	p := newPendingStart(start, lease)
	if s.cfg.SyncStartDelay < 0 {
		p.send(ctx, s.writer)
	} else {
		t := time.AfterFunc(s.cfg.SyncStartDelay, func() { p.sendHere(ctx, s.writer) })
		defer t.Stop()
	}
	runCtx := spawn.WithPendingStart(ctx, func() error { return p.durable(ctx, s.writer) })
	a := s.exec.RunFunction(runCtx, started, e, d, input, time.Time{})

	closing, next, oerr := s.completer.Closing(started, a.Timeline, a.Outcome, s.cfg.Clock.Now())
	p.mu.Lock()
	if !p.taken && oerr == nil {
		p.close, p.next = closing, next
		p.mu.Unlock()
		if err := p.durable(ctx, s.writer); err != nil {
			return started, err
		}
		return p.final, nil
	}
	p.mu.Unlock()
	// The outcome is written after the start, which must be durable first (its lease check).
	if err := p.durable(ctx, s.writer); err != nil {
		return started, err
	}
	return s.completer.Complete(ctx, started, d, a.Timeline, a.Outcome, nil)
}
