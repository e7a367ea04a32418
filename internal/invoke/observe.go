package invoke

import (
	"context"
	"sync"
	"time"

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

// update is Store.Update for the writes that create invocations or change their status: once the
// transaction commits, the Observer hears of the invocations fn created and of those it left in a
// terminal status (noticed as fn writes them, through notingTx, wherever the write happens:
// an attempt's outcome, a cancel, a compensation's end), and the waits for those to end
// (finish.go) are woken. With no Observer and no wait it is Store.Update.
func (s *Service) update(ctx context.Context, fn func(store.Tx) error) error {
	if s.noObserver && !s.waiting() {
		return s.cfg.Store.Update(ctx, fn)
	}
	n := notingPool.Get().(*notingTx)
	n.fn = fn
	return s.noted(n, s.cfg.Store.Update(ctx, n.run))
}

// enqueue is update through Store.Enqueue: fn is queued behind earlier writes and enqueue returns
// at once; the returned wait (to be called once) reports fn's outcome, after the Observer and the
// waits for ends have heard of what it committed.
func (s *Service) enqueue(ctx context.Context, fn func(store.Tx) error) (wait func() error) {
	if s.noObserver && !s.waiting() {
		return s.cfg.Store.Enqueue(ctx, fn)
	}
	n := notingPool.Get().(*notingTx)
	n.fn = fn
	w := s.cfg.Store.Enqueue(ctx, n.run)
	return func() error { return s.noted(n, w()) }
}

// noted reports what the write noted by n committed (err == nil) and returns n to its pool.
func (s *Service) noted(n *notingTx, err error) error {
	if err == nil {
		if !s.noObserver {
			for i := range n.created {
				s.cfg.Observer.Created(n.created[i])
			}
		}
		for i := range n.changed {
			if n.changed[i].Status.Terminal() {
				if !s.noObserver {
					s.cfg.Observer.Finished(n.changed[i])
				}
				s.finished(n.changed[i].ID)
			}
		}
	}
	n.reset(nil)
	n.fn = nil
	notingPool.Put(n)
	return err
}

// dequeued reports the start of a queued invocation's first attempt (rec as its claim left it).
func (s *Service) dequeued(rec invocation.Record) {
	if rec.Mode == invocation.ModeAsync && rec.Attempt == 1 && rec.EngineAttempt == 1 && rec.StartedAt != nil {
		s.cfg.Observer.Dequeued(rec, rec.StartedAt.Sub(rec.CreatedAt))
	}
}

// notingTx is a store.Tx that notes the invocations a transaction creates and the last state of
// each one whose status it changes.
type notingTx struct {
	store.Tx
	created []invocation.Record
	changed []invocation.Record
	fn      func(store.Tx) error // the caller's closure
	run     func(store.Tx) error // runs fn through this notingTx (made once, so no write allocates it)
}

var notingPool = sync.Pool{New: func() any {
	n := &notingTx{}
	n.run = func(tx store.Tx) error {
		n.reset(tx)
		return n.fn(n)
	}
	return n
}}

func (n *notingTx) reset(tx store.Tx) {
	n.Tx = tx
	clear(n.created)
	clear(n.changed)
	n.created, n.changed = n.created[:0], n.changed[:0]
}

// note keeps r as the latest state of its invocation when events changed its status.
func (n *notingTx) note(r invocation.Record, events []invocation.Event) {
	changes := false
	for i := range events {
		changes = changes || invocation.ChangesStatus(events[i].Type)
	}
	if !changes {
		return
	}
	for i := range n.changed {
		if n.changed[i].ID == r.ID {
			n.changed[i] = r
			return
		}
	}
	n.changed = append(n.changed, r)
}

// CreateInvocation implements store.Tx.
func (n *notingTx) CreateInvocation(first invocation.Event) (invocation.Record, error) {
	r, err := n.Tx.CreateInvocation(first)
	if err == nil {
		n.created = append(n.created, r)
	}
	return r, err
}

// StartInvocation implements store.Tx.
func (n *notingTx) StartInvocation(events []invocation.Event, sc store.Scheduling) (invocation.Record, error) {
	r, err := n.Tx.StartInvocation(events, sc)
	if err == nil {
		n.created = append(n.created, r)
		n.note(r, events) // a sync call written whole (runSync) is created finished
	}
	return r, err
}

// Append implements store.Tx.
func (n *notingTx) Append(tenantID, invocationID string, events []invocation.Event, opt store.AppendOptions) (invocation.Record, []invocation.Event, error) {
	r, appended, err := n.Tx.Append(tenantID, invocationID, events, opt)
	if err == nil {
		n.note(r, appended)
	}
	return r, appended, err
}

// AppendEvents implements store.Tx.
func (n *notingTx) AppendEvents(tenantID, invocationID string, events []invocation.Event) (invocation.Record, []invocation.Event, error) {
	r, appended, err := n.Tx.AppendEvents(tenantID, invocationID, events)
	if err == nil {
		n.note(r, appended)
	}
	return r, appended, err
}
