// Package writer commits the engine's state changes. Every write of the invocation engine (starts,
// outcomes, journal entries, control actions) runs through a Writer, which hangs the write's
// consequences on its transaction: inside it, the end hook hears of the invocations it ended and
// the events emitted by code are published (the outbox); once it commits, the Observer hears of
// the invocations it created and ended, the dispatcher (and the other nodes) are woken when it made
// work runnable, and the sync requests waiting for an invocation's end are woken. A rolled-back
// write reports nothing.
package writer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/waits"
)

// Store is the store methods the writer uses: writes, and the invocation reads of AwaitFinish.
type Store interface {
	Update(ctx context.Context, fn func(store.Tx) error) error
	// Enqueue queues fn like Update and returns at once (store.Store.Enqueue).
	Enqueue(ctx context.Context, fn func(store.Tx) error) (wait func() error)
	Invocation(ctx context.Context, tenantID, id string) (invocation.Record, error)
}

// Config wires a Writer. Only Store is required.
type Config struct {
	Store  Store
	Clock  clock.Clock
	Logger *slog.Logger
	// Observer hears of invocations created, dequeued and finished (default: NopObserver).
	Observer Observer
	// Wake is called when a committed write made work runnable or freed a slot (the dispatcher's
	// wake-up); it must not block.
	Wake func()
	// Announce, when set, is called too when a committed write queued work, to wake the other nodes
	// sharing the store (internal/wakeup); it must not block.
	Announce func()
	// AnnounceFinished, when set, is called with the id of a sync invocation whose end a write of
	// this process committed after the transaction that started it, so that the node whose request
	// waits for it is woken (wakeup.Hub.Finished).
	AnnounceFinished func(id string)
	// EndHook, when set, hears of every invocation a write leaves in a terminal status, inside the
	// write's transaction.
	EndHook EndHook
	// Publisher publishes the events code emits (r_emit_v1) in the transaction that records them
	// (default: store the event and resolve the waits of suspended workflows, waits.Publisher).
	Publisher Publisher
	// SyncPoll is how often AwaitFinish reads the store for an end committed elsewhere (default 1 s).
	SyncPoll time.Duration
}

// Writer runs the engine's writes (Update, Enqueue, Tx) and waits for invocations' ends
// (WatchFinish, AwaitFinish).
type Writer struct {
	store            Store
	clock            clock.Clock
	logger           *slog.Logger
	observer         Observer
	noObserver       bool // the Observer is the no-op one: writes note changes only when a sync request waits
	wake, announce   func()
	announceFinished func(id string)
	endHook          EndHook
	publisher        Publisher
	syncPoll         time.Duration
	finish           finishWaiters
}

// New returns a Writer.
func New(cfg Config) *Writer {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	if cfg.SyncPoll <= 0 {
		cfg.SyncPoll = time.Second
	}
	w := &Writer{store: cfg.Store, clock: cfg.Clock, logger: cfg.Logger, observer: cfg.Observer, wake: cfg.Wake,
		announce: cfg.Announce, announceFinished: cfg.AnnounceFinished, endHook: cfg.EndHook, publisher: cfg.Publisher,
		syncPoll: cfg.SyncPoll}
	_, w.noObserver = cfg.Observer.(NopObserver)
	if w.publisher == nil {
		w.publisher = waits.Publisher{}
	}
	return w
}

// Tx is tx with the writer's consequences hooked on (as Update gives its function): for a write
// made in a transaction another service opened (a schedule's start, an event's delivery).
func (w *Writer) Tx(tx store.Tx) store.Tx {
	if n, ok := tx.(*notingTx); ok && n.w == w {
		return tx
	}
	return &notingTx{Tx: tx, w: w}
}

// Logger is the writer's logger.
func (w *Writer) Logger() *slog.Logger { return w.logger }

// Observer is the writer's Observer (NopObserver by default).
func (w *Writer) Observer() Observer { return w.observer }

// AttemptObserver hears of the end of every attempt the engine runs (a function attempt, a
// workflow or DAG activation), as its span ends; an Observer that is one (package metrics) is
// told through Writer.AttemptEnded. kind is "function", "workflow" or "dag"; outcome is the
// attempt's (succeeded, retry_scheduled, failed, suspended for functions; the status the
// activation left for workflows and DAGs; "lost" for a remote attempt whose worker went away;
// "error" when it could not be recorded).
type AttemptObserver interface {
	AttemptEnded(rec invocation.Record, kind, outcome string)
}

// AttemptEnded reports the end of one attempt of rec to the Observer, when it is an
// AttemptObserver (nil: nothing).
func (w *Writer) AttemptEnded(rec invocation.Record, kind, outcome string) {
	if w == nil {
		return
	}
	if a, ok := w.observer.(AttemptObserver); ok {
		a.AttemptEnded(rec, kind, outcome)
	}
}

// ActivationOutcome is the outcome a workflow or DAG activation reports to the metrics
// (writer.AttemptObserver): the status it left the invocation in ("queued": a retry was
// scheduled), or "error" when it could not be recorded.
func ActivationOutcome(status invocation.Status, err error) string {
	switch {
	case err != nil:
		return "error"
	case status == invocation.StatusQueued:
		return "retry_scheduled"
	}
	return string(status)
}

// Wake wakes this node's dispatcher.
func (w *Writer) Wake() { w.wake() }

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

// Update is Store.Update for every write of the engine's: fn writes through a notingTx, which hangs
// the write's consequences on the transaction's AfterCommit hook (notingTx.report): the Observer
// hears of the invocations fn created and of those it left in a terminal status, the waits for
// those to end (WatchFinish) are woken, and so is the dispatcher when the write made work runnable
// or freed a slot. A rolled-back write reports nothing. The writes are store.Optimistic: fn acts
// outside its transaction only through those hooks.
func (w *Writer) Update(ctx context.Context, fn func(store.Tx) error) error {
	return w.store.Update(store.Optimistic(ctx), w.noting(fn))
}

// Enqueue is Update through Store.Enqueue: fn is queued behind earlier writes and enqueue returns
// at once; the returned wait (to be called once) reports fn's outcome, the hooks having run.
func (w *Writer) Enqueue(ctx context.Context, fn func(store.Tx) error) (wait func() error) {
	return w.store.Enqueue(store.Optimistic(ctx), w.noting(fn))
}

// noting runs fn through a notingTx.
func (w *Writer) noting(fn func(store.Tx) error) func(store.Tx) error {
	return func(tx store.Tx) error { return fn(&notingTx{Tx: tx, w: w}) }
}

// Dequeued reports the start of a queued invocation's first attempt (rec as its claim left it):
// its queue wait up to the start of its execution when the run measured it (waitMS), otherwise
// from its creation (or due, when the claim knew it) to its claim.
func (w *Writer) Dequeued(rec invocation.Record, due time.Time, waitMS *int64) {
	if rec.Mode != invocation.ModeAsync || rec.Attempt != 1 || rec.EngineAttempt != 1 || rec.StartedAt == nil {
		return
	}
	if waitMS != nil {
		w.observer.Dequeued(rec, time.Duration(*waitMS)*time.Millisecond)
		return
	}
	from := rec.CreatedAt
	if !due.IsZero() {
		from = due
	}
	w.observer.Dequeued(rec, max(rec.StartedAt.Sub(from), 0))
}

// notingTx is a store.Tx that notes the invocations a transaction creates, the last state of each
// one whose status it changes and whether it made work runnable, and reports them once the
// transaction has committed (report, its AfterCommit hook).
type notingTx struct {
	store.Tx
	w       *Writer
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
	w := n.w
	if !w.noObserver {
		for i := range n.created {
			w.observer.Created(n.created[i])
		}
	}
	for i := range n.changed {
		rec := &n.changed[i]
		if rec.Status.Terminal() {
			w.logEnded(*rec)
			if !w.noObserver {
				w.observer.Finished(*rec)
			}
			w.Finished(rec.ID)
			if rec.Mode == invocation.ModeSync && w.announceFinished != nil && !n.createdHere(rec.ID) {
				w.announceFinished(rec.ID)
			}
		}
	}
	if n.wake {
		w.wake()
	}
	if n.queued && w.announce != nil {
		w.announce()
	}
	for _, ev := range n.emitted {
		w.logger.Info("event emitted", "tenant_id", ev.TenantID, "event_id", ev.ID, "event_type_id", ev.TypeID,
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
	if h := n.w.endHook; h != nil && r.Status.Terminal() {
		if err := h.InvocationEnded(n, r); err != nil {
			return err
		}
	}
	// A slot may be free, or work queued: the dispatcher may claim. Not after an invocation created
	// ended in this very transaction (a sync call written whole): it held no dispatcher slot, was
	// never counted running in the store (max_concurrent), and the admission room it held is the
	// gate's to announce (admission.Options.OnRoom). Waking for it cost a claim's reads per call.
	if !r.Status.Terminal() || !n.createdHere(r.ID) {
		n.wake = n.wake || r.Status != invocation.StatusRunning
	}
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
		if err := n.note(r, events); err != nil { // a sync call written whole (invoke's runSync) is created finished
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

// EndHook hears of every invocation a write leaves in a terminal status, inside that
// write's transaction (before it commits): the event triggers service records there the outcome of
// the invocations its triggers started (dead letters, metrics). An error fails the write. It must
// be quick and cheap for the invocations it does not care about.
type EndHook interface {
	InvocationEnded(tx store.Tx, rec invocation.Record) error
}

// EndHookFunc is a function as an EndHook.
type EndHookFunc func(tx store.Tx, rec invocation.Record) error

// InvocationEnded implements EndHook.
func (f EndHookFunc) InvocationEnded(tx store.Tx, rec invocation.Record) error { return f(tx, rec) }

// Publisher publishes platform events inside the caller's transaction: it stores the event
// (idempotent on the tenant's event id: a repeated id returns the stored event and inserted false,
// and delivers nothing) and delivers it to whatever reacts to events (waiting workflows, triggers).
// The events code emits (r_emit_v1) are published through it. The default (Config.Publisher nil)
// stores the event and resolves the waits of suspended workflows (waits.Publisher).
type Publisher interface {
	PublishTx(tx store.Tx, ev events.Event, now time.Time) (stored events.Event, inserted bool, err error)
}

// publishEmitted publishes the events of the event_emitted entries among events, appended to rec's
// log by this transaction (the outbox: an event becomes visible exactly when what emitted it
// commits). The event's source names the invocation, its publisher is the invocation's starter,
// and it carries the invocation's correlation id.
func (n *notingTx) publishEmitted(rec invocation.Record, evs []invocation.Event) error {
	for _, e := range evs {
		if e.Type != invocation.EventEmitted {
			continue
		}
		em, err := invocation.DecodeData[invocation.Emitted](e)
		if err != nil {
			return fmt.Errorf("event_emitted %d of %s: %w", e.Seq, rec.ID, err)
		}
		at := e.At
		ev := events.Event{ID: em.EventID, TenantID: rec.TenantID, TypeID: em.EventTypeID, Payload: em.Payload,
			Source: invocation.EmitSource(rec.ID), Time: &at, PublishedBy: rec.SubjectID, CorrelationID: rec.CorrelationID}
		now := n.w.clock.Now()
		ev.ReceivedAt = now
		stored, inserted, err := n.w.publisher.PublishTx(n, ev, now)
		if err != nil {
			return fmt.Errorf("publishing emitted event %s: %w", em.EventID, err)
		}
		if inserted {
			n.emitted = append(n.emitted, stored)
			n.hook()
		}
	}
	return nil
}

// finishWaiters are the waits for invocations to end, by invocation id.
type finishWaiters struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
	n  atomic.Int64 // how many waits there are (Update notes changes only when some wait, or an Observer listens)
}

// WatchFinish registers a wait for invocation id to end; the channel receives when a write of this
// process commits a terminal status for it. stop removes the wait.
func (w *Writer) WatchFinish(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f := &w.finish
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string]map[chan struct{}]struct{}{}
	}
	if f.m[id] == nil {
		f.m[id] = map[chan struct{}]struct{}{}
	}
	f.m[id][ch] = struct{}{}
	f.n.Add(1)
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.m[id], ch)
		if len(f.m[id]) == 0 {
			delete(f.m, id)
		}
		f.n.Add(-1)
		f.mu.Unlock()
	}
}

// Finished wakes the waits for invocation id (after a commit left it in a terminal status).
func (w *Writer) Finished(id string) {
	f := &w.finish
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.m[id] {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}

// AwaitFinish waits for invocation rec to reach a terminal status until deadline (on the service's
// clock, checked at every wake-up, and as a timer of the remaining time), the end of ctx, or
// closing. woken is its WatchFinish channel, registered before the invocation's first activation so
// that no commit of its end can slip between the activation and the wait. It returns the latest
// stored record and whether it is terminal.
func (w *Writer) AwaitFinish(ctx context.Context, closing <-chan struct{}, rec invocation.Record, deadline time.Time, woken <-chan struct{}) (invocation.Record, bool, error) {
	poll := time.NewTicker(w.syncPoll)
	defer poll.Stop()
	timer := time.NewTimer(max(deadline.Sub(w.clock.Now()), 0))
	defer timer.Stop()
	read := context.WithoutCancel(ctx) // the last read happens after the caller's deadline too
	over := false
	for {
		cur, err := w.store.Invocation(read, rec.TenantID, rec.ID)
		if err != nil {
			return rec, false, err
		}
		if cur.Status.Terminal() {
			return cur, true, nil
		}
		if over || !w.clock.Now().Before(deadline) {
			return cur, false, nil
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-timer.C:
			over = true
		case <-ctx.Done():
			over = true
		case <-closing:
			over = true
		}
	}
}

// logEnded writes the log line of an invocation that reached a terminal status: debug when it
// succeeded (a line per successful call would put formatting on the hot path at info level; the
// invocation's own record and timeline keep everything the line says), info when it failed, was
// canceled or compensated, warn when it was dead-lettered.
func (w *Writer) logEnded(rec invocation.Record) {
	level, msg := slog.LevelInfo, "run finished"
	switch rec.Status {
	case invocation.StatusSucceeded:
		level = slog.LevelDebug
	case invocation.StatusDeadLettered:
		level, msg = slog.LevelWarn, "run dead-lettered"
	}
	ctx := context.Background()
	if !w.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("tenant_id", rec.TenantID), slog.String("entrypoint_id", rec.EntrypointID),
		slog.String("invocation_id", rec.ID), slog.String("status", string(rec.Status)), slog.Int("attempt", rec.Attempt),
		slog.String("correlation_id", rec.CorrelationID), slog.String("trace_id", rec.TraceID)}
	if rec.StartedAt != nil {
		attrs = append(attrs, slog.Int64("duration_ms", max(rec.UpdatedAt.Sub(*rec.StartedAt), 0).Milliseconds()))
	}
	if rec.Error != nil {
		attrs = append(attrs, slog.String("error_type", rec.Error.TypeID))
	}
	w.logger.LogAttrs(ctx, level, msg, attrs...)
}
