package invoke

import (
	"context"
	"time"

	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
)

// Observer is told about the moments of an invocation's life that operators count (package
// metrics implements it). A moment recorded in a transaction is reported only after that
// transaction commits, so a rolled-back write is never counted. Calls come on the goroutine that
// made the change: implementations must be cheap and must not block.
type Observer interface {
	// Created: a new invocation was stored: an API start, a replay, an r_invoke_v1 child or a
	// compensation handler (queued, or already running for sync starts and synchronous children).
	Created(rec invocation.Record)
	// Dequeued: the first attempt of a queued (async) invocation started, waited after it was created.
	Dequeued(rec invocation.Record, waited time.Duration)
	// Finished: the invocation reached a terminal status (succeeded, failed, canceled, compensated
	// or dead_lettered). One that a control action queues again is reported again when it next ends.
	Finished(rec invocation.Record)
	// RateLimited: a start was refused by the entrypoint's rate limit (429 rate_limited).
	RateLimited(tenantID, entrypointID string)
	// QuotaExceeded: a start was refused by the tenant's quota (429 quota_exceeded), e.g.
	// "max_concurrent_executions".
	QuotaExceeded(tenantID, quota string)
}

// NopObserver ignores everything; it is the default Observer.
type NopObserver struct{}

// Created implements Observer.
func (NopObserver) Created(invocation.Record) {}

// Dequeued implements Observer.
func (NopObserver) Dequeued(invocation.Record, time.Duration) {}

// Finished implements Observer.
func (NopObserver) Finished(invocation.Record) {}

// RateLimited implements Observer.
func (NopObserver) RateLimited(string, string) {}

// QuotaExceeded implements Observer.
func (NopObserver) QuotaExceeded(string, string) {}

// update is Store.Update for every write of invoke's: fn writes through a notingTx, which hangs
// the write's consequences on the transaction's AfterCommit hook (notingTx.report): the Observer
// hears of the invocations fn created and of those it left in a terminal status, the waits for
// those to end (finish.go) are woken, and so is the dispatcher when the write made work runnable or
// freed a slot. A rolled-back write reports nothing. The writes are store.Optimistic: fn acts
// outside its transaction only through those hooks.
func (s *Service) update(ctx context.Context, fn func(store.Tx) error) error {
	return s.cfg.Store.Update(store.Optimistic(ctx), s.noting(fn))
}

// enqueue is update through Store.Enqueue: fn is queued behind earlier writes and enqueue returns
// at once; the returned wait (to be called once) reports fn's outcome, the hooks having run.
func (s *Service) enqueue(ctx context.Context, fn func(store.Tx) error) (wait func() error) {
	return s.cfg.Store.Enqueue(store.Optimistic(ctx), s.noting(fn))
}

// noting runs fn through a notingTx.
func (s *Service) noting(fn func(store.Tx) error) func(store.Tx) error {
	return func(tx store.Tx) error { return fn(&notingTx{Tx: tx, s: s}) }
}

// dequeued reports the start of a queued invocation's first attempt (rec as its claim left it):
// its queue wait up to the start of its execution when the run measured it (waitMS), otherwise
// from its creation (or due, when the claim knew it) to its claim.
func (s *Service) dequeued(rec invocation.Record, due time.Time, waitMS *int64) {
	if rec.Mode != invocation.ModeAsync || rec.Attempt != 1 || rec.EngineAttempt != 1 || rec.StartedAt == nil {
		return
	}
	if waitMS != nil {
		s.cfg.Observer.Dequeued(rec, time.Duration(*waitMS)*time.Millisecond)
		return
	}
	from := rec.CreatedAt
	if !due.IsZero() {
		from = due
	}
	s.cfg.Observer.Dequeued(rec, max(rec.StartedAt.Sub(from), 0))
}

// notingTx is a store.Tx that notes the invocations a transaction creates, the last state of each
// one whose status it changes and whether it made work runnable, and reports them once the
// transaction has committed (report, its AfterCommit hook).
type notingTx struct {
	store.Tx
	s       *Service
	created []invocation.Record
	changed []invocation.Record
	wake    bool // work became runnable or a running invocation stopped: the dispatcher may claim
	queued  bool // work became runnable: the other nodes' dispatchers may claim it (Config.Announce)
	hooked  bool
	emitted []events.Event // events published from event_emitted entries (publishEmitted), logged once committed
}

// hook registers report once.
func (n *notingTx) hook() {
	if !n.hooked {
		n.hooked = true
		n.AfterCommit(n.report)
	}
}

// report is the committed transaction's consequences.
func (n *notingTx) report() {
	s := n.s
	if !s.noObserver {
		for i := range n.created {
			s.cfg.Observer.Created(n.created[i])
		}
	}
	for i := range n.changed {
		rec := &n.changed[i]
		if rec.Status.Terminal() {
			s.logEnded(*rec)
			if !s.noObserver {
				s.cfg.Observer.Finished(*rec)
			}
			s.finished(rec.ID)
			if rec.Mode == invocation.ModeSync && s.cfg.AnnounceFinished != nil && !n.createdHere(rec.ID) {
				s.cfg.AnnounceFinished(rec.ID)
			}
		}
	}
	if n.wake {
		s.cfg.Wake()
	}
	if n.queued && s.cfg.Announce != nil {
		s.cfg.Announce()
	}
	for _, ev := range n.emitted {
		s.cfg.Logger.Info("event emitted", "tenant_id", ev.TenantID, "event_id", ev.ID, "event_type_id", ev.TypeID,
			"source", ev.Source, "correlation_id", ev.CorrelationID)
	}
}

// createdHere reports whether invocation id was created in this transaction (a sync function's
// start and end are one transaction: no request waits for it elsewhere).
func (n *notingTx) createdHere(id string) bool {
	for i := range n.created {
		if n.created[i].ID == id {
			return true
		}
	}
	return false
}

// scheduled notes queue state that makes work runnable.
func (n *notingTx) scheduled(sc *store.Scheduling) {
	if sc != nil && sc.AvailableAt != nil {
		n.wake, n.queued = true, true
		n.hook()
	}
}

// note keeps r as the latest state of its invocation when events changed its status, and tells
// the EndHook, inside the transaction, when they ended it.
func (n *notingTx) note(r invocation.Record, events []invocation.Event) error {
	changes := false
	for i := range events {
		changes = changes || invocation.ChangesStatus(events[i].Type)
	}
	if !changes {
		return nil
	}
	if h := n.s.endHook; h != nil && r.Status.Terminal() {
		if err := h.InvocationEnded(n, r); err != nil {
			return err
		}
	}
	n.wake = n.wake || r.Status != invocation.StatusRunning // a slot may be free (or work queued)
	n.hook()
	for i := range n.changed {
		if n.changed[i].ID == r.ID {
			n.changed[i] = r
			return nil
		}
	}
	n.changed = append(n.changed, r)
	return nil
}

// StartInvocation implements store.Tx.
func (n *notingTx) StartInvocation(events []invocation.Event, sc store.Scheduling) (invocation.Record, error) {
	r, err := n.Tx.StartInvocation(events, sc)
	if err == nil {
		n.created = append(n.created, r)
		n.hook()
		n.scheduled(&sc)
		if err := n.note(r, events); err != nil { // a sync call written whole (runSync) is created finished
			return r, err
		}
		err = n.publishEmitted(r, events)
	}
	return r, err
}

// Append implements store.Tx.
func (n *notingTx) Append(req store.AppendRequest) (invocation.Record, []invocation.Event, error) {
	r, appended, err := n.Tx.Append(req)
	if err == nil {
		n.scheduled(req.Schedule)
		if err := n.note(r, appended); err != nil {
			return r, appended, err
		}
		err = n.publishEmitted(r, appended)
	}
	return r, appended, err
}
