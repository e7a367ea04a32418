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

// pendingStart is a sync function call's start (created, started and the lease) on its way to the
// disk while the function already runs. The committer takes it under mu: if the attempt's outcome
// is attached by then, the one write holds the whole invocation.
type pendingStart struct {
	mu    sync.Mutex
	taken bool               // the committer has run the write (it may not have committed yet)
	close []invocation.Event // the outcome's events, attached before the write was taken
	next  store.Scheduling   // the queue state they leave
	final invocation.Record  // the record the merged write left
	done  chan error         // the write's outcome
	start []invocation.Event // created, started
	lease store.Scheduling   // the started attempt's lease
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
// nothing in its start depends on what else is in the store) while its start is written, and
// answers with its durable outcome. input is its params, decoded (catalog.Catalog.ValidateParams).
//
// The start goes to the group committer without waiting for it. When the function ends before the
// committer has taken the start, which under load is the rule, its outcome joins the same write:
// one transaction and one insert of the record, with the whole log (created, started, the
// timeline, the outcome). Otherwise the outcome is written as usual, after the start (the one
// writer keeps their order; the outcome's write fails if the start's did).
//
// Crash semantics: the caller is answered only after the outcome is durable. A crash before the
// start is durable leaves no trace of the call, which the caller sees as a failed request (as with
// any HTTP call) and can retry; a crash after it leaves a running invocation whose lease expires
// and which is then reclaimed and run again, as for every started attempt. A long call is visible
// (GET, list, cancel) once its start is durable, within one group commit.
func (s *Service) runSync(ctx context.Context, rec invocation.Record, input any, e entrypoint.Entrypoint, d catalog.Definition, now time.Time) (invocation.Record, error) {
	start, lease, err := s.spawn.StartEvents(rec, d, now)
	if err != nil {
		return rec, err
	}
	started, err := spawn.StartedRecord(start)
	if err != nil {
		return rec, err
	}
	p := &pendingStart{start: start, lease: lease, done: make(chan error, 1)}
	go func() { p.done <- s.writer.Update(ctx, p.write) }()

	a := s.exec.RunFunction(ctx, started, e, d, input, time.Time{})

	closing, next, oerr := s.completer.Closing(started, a.Timeline, a.Outcome, s.cfg.Clock.Now())
	p.mu.Lock()
	if !p.taken && oerr == nil {
		p.close, p.next = closing, next
		p.mu.Unlock()
		if err := <-p.done; err != nil {
			return started, err
		}
		return p.final, nil
	}
	p.mu.Unlock()
	final, err := s.completer.Complete(ctx, started, d, a.Timeline, a.Outcome, nil)
	if serr := <-p.done; serr != nil && err == nil {
		err = serr
	}
	return final, err
}
