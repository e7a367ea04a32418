// Package complete writes what an attempt came to: the closing write of its timeline and outcome,
// under the lease check (a runner that lost its lease records a late_result and applies nothing),
// priced at the tenant's current prices, with the follow-up writes of the applied outcome, typed
// effects (spawn a child, start a handler, register or clear an event wait), the resolution of the
// parent or compensated workflow of an invocation that ended, and the response cache entry.
package complete

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/larkrun/lark/internal/attempt"
	"github.com/larkrun/lark/internal/catalog"
	"github.com/larkrun/lark/internal/clock"
	"github.com/larkrun/lark/internal/cost"
	"github.com/larkrun/lark/internal/events"
	"github.com/larkrun/lark/internal/invocation"
	"github.com/larkrun/lark/internal/outcome"
	"github.com/larkrun/lark/internal/sandbox"
	"github.com/larkrun/lark/internal/spawn"
	"github.com/larkrun/lark/internal/store"
	"github.com/larkrun/lark/internal/waits"
	"github.com/larkrun/lark/internal/writer"
)

// Config wires a Completer.
type Config struct {
	Writer *writer.Writer
	// Spawn writes the children and handlers that effects start, and names the leases.
	Spawn   *spawn.Spawner
	Pricing *cost.Pricing
	Clock   clock.Clock
	// Runs decides a DAG task's end in its child's closing transaction when it can (nil: every
	// end is told to the run, for its activation to decide).
	Runs Runs
}

// Runs decides the end of a DAG run's task in the closing transaction of its child (internal/dagrun).
type Runs interface {
	// ChildEnded records child's task's end and its consequences, or reports false having written
	// nothing (the run's activation then decides it).
	ChildEnded(tx store.Tx, child invocation.Record, now time.Time) (bool, error)
}

// Completer records attempts' outcomes.
type Completer struct {
	writer  *writer.Writer
	spawn   *spawn.Spawner
	pricing *cost.Pricing
	clock   clock.Clock
	runs    Runs
}

// New returns a Completer.
func New(cfg Config) *Completer {
	return &Completer{writer: cfg.Writer, spawn: cfg.Spawn, pricing: cfg.Pricing, clock: cfg.Clock, runs: cfg.Runs}
}

// Chain is the chain of journal writes an outcome is queued behind (host.Host): ExpectChain makes
// a write expect exactly the projection the last of them leaves, or fails with its error.
type Chain interface {
	ExpectChain(opt *store.AppendOptions) error
}

// Effect is a follow-up write of an applied outcome, made in its transaction. Build one with
// SpawnChild, StartHandler, RegisterWait or ClearWaits.
type Effect struct {
	kind effectKind
	inv  invocation.Record // the child or the handler
	def  catalog.Definition
	wait events.Wait
	seen int64
	fn   func(tx store.Tx, final invocation.Record) error
}

type effectKind int

const (
	spawnChild effectKind = iota + 1
	startHandler
	registerWait
	clearWaits
	wakeIfNewer
	also
)

// SpawnChild queues child, the r_invoke_v1 child a workflow parks on (d: its definition), with
// the outcome.
func SpawnChild(child invocation.Record, d catalog.Definition) Effect {
	return Effect{kind: spawnChild, inv: child, def: d}
}

// StartHandler queues handler, the on_failure compensation of a failed workflow, when the outcome
// leaves the workflow compensating.
func StartHandler(handler invocation.Record, d catalog.Definition) Effect {
	return Effect{kind: startHandler, inv: handler, def: d}
}

// RegisterWait registers the event wait a workflow suspends on, when the outcome leaves it
// suspended (waits.Register: an event stored already resolves it at once).
func RegisterWait(w events.Wait) Effect { return Effect{kind: registerWait, wait: w} }

// ClearWaits removes the workflow's registered event waits (it waited for an event earlier and no
// longer does), unless the outcome registers a new one.
func ClearWaits() Effect { return Effect{kind: clearWaits} }

// WakeIfNewer makes a suspended outcome runnable at once when events the run had not seen (seq
// above seen) were appended to its log before this write: a DAG run's task that ended while the
// run's activation was deciding (its task_child_ended found the run running, not suspended).
func WakeIfNewer(seen int64) Effect { return Effect{kind: wakeIfNewer, seen: seen} }

// Also makes fn's writes with the outcome, when it applies (final: the record it left): a DAG
// task's materialization promoted in the transaction that records the task's end.
func Also(fn func(tx store.Tx, final invocation.Record) error) Effect {
	return Effect{kind: also, fn: fn}
}

// Handler is the compensation handler effects start, if any.
func Handler(effects []Effect) *invocation.Record {
	for i := range effects {
		if effects[i].kind == startHandler {
			return &effects[i].inv
		}
	}
	return nil
}

// apply makes effects' writes for an outcome that left rec as final.
func (c *Completer) apply(tx store.Tx, rec, final invocation.Record, before int64, effects []Effect, now time.Time) error {
	registered := false
	for _, e := range effects {
		var err error
		switch {
		case e.kind == startHandler && final.Status == invocation.StatusCompensating, e.kind == spawnChild:
			_, err = c.spawn.Create(tx, e.inv, false, e.def, now)
		case e.kind == registerWait && final.Status == invocation.StatusSuspended:
			err, registered = waits.Register(tx, final, e.wait, now), true
		case e.kind == wakeIfNewer && final.Status == invocation.StatusSuspended && before > e.seen:
			err = tx.SetScheduling(final.TenantID, final.ID, store.Scheduling{AvailableAt: &now})
		case e.kind == also:
			err = e.fn(tx, final)
		}
		if err != nil {
			return err
		}
	}
	if !registered && slices.ContainsFunc(effects, func(e Effect) bool { return e.kind == clearWaits }) {
		return tx.DeleteEventWaits(rec.TenantID, rec.ID)
	}
	return nil
}

// Complete records an attempt's outcome in one transaction: the attempt's timeline entries, then
// succeeded, a scheduled retry, or failed followed by dead_lettered (functions have no compensation).
// If this process no longer holds the attempt's lease (it was canceled, or the lease expired and the
// work moved), the outcome is recorded as late_result and not applied.
// effects are the follow-up writes of the outcome when it applies (a workflow that parks: the child
// it waits for, the event wait it registers; a failed one: its compensation handler). o is what
// the attempt came to (the workflow engine's decision for a workflow run, the run stage's for a
// function): a suspended outcome leaves the workflow holding no goroutine; the queue wakes it at
// o.Until, or its child's end or its event does.
func (c *Completer) Complete(ctx context.Context, rec invocation.Record, d catalog.Definition, timeline []invocation.Event,
	o outcome.Outcome, effects []Effect) (invocation.Record, error) {
	return c.completeWith(ctx, rec, d, timeline, o, effects, nil, false)
}

// CompleteShared is Complete for an invocation that others append to while it runs (a DAG run:
// its children's ends): the closing write folds its events into the stored projection, read under
// the row's lock, rather than expecting rec (which an append since the claim made stale; on
// PostgreSQL's optimistic writes the expectation would fail at every replay).
func (c *Completer) CompleteShared(ctx context.Context, rec invocation.Record, d catalog.Definition, timeline []invocation.Event,
	o outcome.Outcome, effects []Effect) (invocation.Record, error) {
	return c.completeWith(ctx, rec, d, timeline, o, effects, nil, true)
}

// CompleteAfter is Complete for a workflow run whose journal writes are still on their way
// (host.Host.EnqueueJournal): the outcome is queued behind them without waiting and expects
// exactly the projection the last of them leaves (chain; it fails when one did not apply, or when
// anything else wrote in between). The caller flushes its journal writes afterwards, and completes
// again, as usual, if this failed.
func (c *Completer) CompleteAfter(ctx context.Context, rec invocation.Record, d catalog.Definition, timeline []invocation.Event,
	o outcome.Outcome, chain Chain) (invocation.Record, error) {
	return c.completeWith(ctx, rec, d, timeline, o, nil, chain, false)
}

// CompleteStart records a sync call whose start was held back while its first activation ran (a
// workflow's: workflow.Claim.HoldStart): the start (its created and started events), the
// attempt's timeline and the events of o, in one write that creates the invocation whole, with the
// queue state o leaves (the start's lease is never written) and the writes that go with the
// outcome. rec is the record the start leaves.
func (c *Completer) CompleteStart(ctx context.Context, start []invocation.Event, rec invocation.Record,
	d catalog.Definition, timeline []invocation.Event, o outcome.Outcome) (invocation.Record, error) {
	var final invocation.Record
	err := c.writer.Update(ctx, func(tx store.Tx) error {
		now := c.clock.Now()
		closing, next, err := c.Closing(rec, timeline, o, now)
		if err != nil {
			return err
		}
		if final, err = tx.StartInvocation(slices.Concat(start, closing), next); err != nil {
			return err
		}
		return c.followUps(tx, rec, final, int64(len(start)), d, o, nil, now)
	})
	if err != nil {
		return rec, fmt.Errorf("complete %s: %w", rec.ID, err)
	}
	return final, nil
}

// Closing prices o at the tenant's current prices and returns the events that close rec's attempt
// after its timeline entries, and the queue state they leave.
func (c *Completer) Closing(rec invocation.Record, timeline []invocation.Event, o outcome.Outcome, now time.Time) ([]invocation.Event, store.Scheduling, error) {
	o.Cost = c.pricing.For(rec.TenantID).Execution(o.Metrics)
	events, available, err := o.Events(rec, timeline, now)
	return events, store.Scheduling{AvailableAt: available}, err
}

// Informational is what survives of an attempt's timeline when its outcome is not applied as it
// ran: no journal entries (another runner may be replaying those positions), no emitted events
// (never published by an outcome that did not apply), no step retries or compensation records, and
// no child_invoked of a parked child (created only with an applied outcome).
func Informational(timeline []invocation.Event, effects []Effect) []invocation.Event {
	parkedChild := slices.ContainsFunc(effects, func(e Effect) bool { return e.kind == spawnChild })
	var out []invocation.Event
	for _, ev := range timeline {
		switch {
		case ev.Type == invocation.EventJournal, ev.Type == invocation.EventJournalResolved, ev.Type == invocation.EventStepRetried, ev.Type == invocation.EventEmitted,
			ev.Type == invocation.EventStepCompensating, ev.Type == invocation.EventStepCompensated, parkedChild && ev.Type == invocation.EventChildInvoked,
			invocation.IsDAGDecision(ev.Type):
		default:
			out = append(out, ev)
		}
	}
	return out
}

// completeWith records o in one transaction (Complete, CompleteAfter): the closing write of rec's
// attempt (completeRequest), then either a late_result when the lease was lost (completeLate) or
// the writes that go with the applied outcome (followUps). after, when set, is the chain of queued
// journal writes the outcome follows.
func (c *Completer) completeWith(ctx context.Context, rec invocation.Record, d catalog.Definition, timeline []invocation.Event,
	o outcome.Outcome, effects []Effect, after Chain, shared bool) (invocation.Record, error) {
	owner := c.spawn.LeaseOwner(rec)
	// The execution's cost, at the prices of this moment, goes into the event that closes it
	// (invocation.Execution): whatever that event is, and even when the outcome is not applied.
	price := c.pricing.For(rec.TenantID).Execution(o.Metrics)
	if rec.ParentID != "" || rec.CompensationFor != "" {
		ctx = store.OneWriter(ctx) // its end locks its parent's row (Ended)
	}
	var final invocation.Record
	err := c.writer.Update(ctx, func(tx store.Tx) error {
		now := c.clock.Now()
		req, err := c.completeRequest(rec, timeline, o, owner, after, shared, now)
		if err != nil {
			return err
		}
		var appended []invocation.Event
		final, appended, err = tx.Append(req)
		if after != nil && err != nil {
			return err // the caller completes again, as usual
		}
		if errors.Is(err, store.ErrLeaseLost) {
			// Canceled meanwhile, or the lease expired and the work moved: record, never apply.
			final, err = completeLate(tx, rec, timeline, o, effects, price, now)
			return err
		}
		if err != nil {
			return err
		}
		return c.followUps(tx, rec, final, final.LastSeq-int64(len(appended)), d, o, effects, now)
	})
	if err != nil {
		return rec, fmt.Errorf("complete %s: %w", rec.ID, err)
	}
	return final, nil
}

// completeRequest is the closing write of rec's attempt: its timeline entries and the events of
// o, under this process's lease (owner) and expecting rec as it was, or, after queued journal
// writes (after), exactly the projection the last of them leaves.
func (c *Completer) completeRequest(rec invocation.Record, timeline []invocation.Event, o outcome.Outcome, owner string,
	after Chain, shared bool, now time.Time) (store.AppendRequest, error) {
	events, next, err := c.Closing(rec, timeline, o, now)
	if err != nil {
		return store.AppendRequest{}, err
	}
	opt := store.AppendOptions{RequireLease: owner, Schedule: &next, Expect: &rec}
	if shared {
		opt.Expect = nil // others append to it while it runs: fold into the stored projection
	}
	if after != nil {
		if err := after.ExpectChain(&opt); err != nil {
			return store.AppendRequest{}, err
		}
	}
	return store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: events, AppendOptions: opt}, nil
}

// completeLate records the outcome of an attempt that lost its lease without applying it: the
// informational entries of its timeline and a late_result carrying its metrics and cost (price).
func completeLate(tx store.Tx, rec invocation.Record, timeline []invocation.Event, o outcome.Outcome, effects []Effect,
	price float64, now time.Time) (invocation.Record, error) {
	metrics := o.Metrics
	data, err := invocation.EncodeData(invocation.LateResult{Succeeded: o.Err == nil, EngineAttempt: rec.EngineAttempt,
		Metrics: &metrics, Cost: price})
	if err != nil {
		return invocation.Record{}, err
	}
	// Only informational entries survive: a run that lost its lease must never write journal
	// entries (another runner may be replaying those positions), nor step retries.
	late := append(Informational(timeline, effects), invocation.Event{Type: invocation.EventLateResult, Data: data, At: now,
		EngineAttempt: rec.EngineAttempt, LogicalAttempt: rec.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(rec.ID, fmt.Sprintf("late-%d", rec.EngineAttempt), rec.Attempt, invocation.EventLateResult, "")})
	final, _, err := tx.Append(store.AppendRequest{TenantID: rec.TenantID, InvocationID: rec.ID, Events: late})
	return final, err
}

// followUps are the writes that go with an applied outcome (final, the record it left; before, its
// last seq before the outcome's events), in the same transaction: its effects, the writes that go
// with an ended invocation (Ended), and the response cache entry.
func (c *Completer) followUps(tx store.Tx, rec, final invocation.Record, before int64, d catalog.Definition, o outcome.Outcome,
	effects []Effect, now time.Time) error {
	if err := c.apply(tx, rec, final, before, effects, now); err != nil {
		return err
	}
	if final.Status.Terminal() {
		if err := c.Ended(tx, final, now); err != nil {
			return err
		}
	}
	if o.Err == nil && rec.CacheKey != "" && d.Traits.Caching.MaxAgeSeconds > 0 {
		return tx.PutCachedInvocation(store.CacheEntry{Key: rec.CacheKey, TenantID: rec.TenantID, InvocationID: rec.ID, ExpiresAt: now.Add(time.Duration(d.Traits.Caching.MaxAgeSeconds) * time.Second)})
	}
	return nil
}

// Ended is what goes with an invocation that ended (rec, terminal), in the transaction that ended
// it: the resolution of the parent workflow that waits for it as a child, and of the workflow it
// compensated as a handler, and the DAG run it is a task of.
func (c *Completer) Ended(tx store.Tx, rec invocation.Record, now time.Time) error {
	if rec.ParentSeq != nil {
		if err := resolveParent(tx, rec, now); err != nil {
			return err
		}
	}
	if rec.CompensationFor != "" {
		return ResolveCompensation(tx, rec, now)
	}
	if rec.DAGTask != "" {
		return c.notifyRun(tx, rec, now)
	}
	return nil
}

// notifyRun tells the DAG run that child (one of its tasks) ended, in the child's closing
// transaction: the task's end decided there (Runs), or else a task_child_ended event, which makes
// the run runnable when it is suspended. A run that is running when it is told is woken by its own
// closing write (WakeIfNewer); a run that has ended (canceled) is not told: a late result is never
// promoted.
func (c *Completer) notifyRun(tx store.Tx, child invocation.Record, now time.Time) error {
	if c.runs != nil {
		if done, err := c.runs.ChildEnded(tx, child, now); done || err != nil {
			return err
		}
	}
	run, err := tx.Invocation(child.TenantID, child.ParentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || run.Status.Terminal() {
		return err
	}
	ev, err := invocation.Event{Type: invocation.EventTaskChildEnded, At: now, LogicalAttempt: run.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(run.ID, fmt.Sprintf("task-%s-%d", child.ID, child.Attempt), run.Attempt, invocation.EventTaskChildEnded, "")}.
		WithData(invocation.TaskChildEnded{TaskID: child.DAGTask, ChildInvocationID: child.ID, Status: child.Status})
	if err != nil {
		return err
	}
	_, _, err = store.AppendWaking(tx, store.AppendRequest{TenantID: run.TenantID, InvocationID: run.ID, Events: []invocation.Event{ev}}, now)
	return err
}

// resolveParent completes the parent workflow's pending r_invoke_v1 entry with the child's outcome
// and makes the parent runnable, in the child's completion transaction. A parent that no longer
// waits (canceled meanwhile) is left alone.
func resolveParent(tx store.Tx, child invocation.Record, now time.Time) error {
	parent, err := tx.Invocation(child.TenantID, child.ParentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || parent.Status != invocation.StatusSuspended {
		return err
	}
	data, err := invocation.EncodeData(invocation.JournalResolved{Seq: *child.ParentSeq, Result: ChildResult(child), ChildInvocationID: child.ID})
	if err != nil {
		return err
	}
	ev := invocation.Event{Type: invocation.EventJournalResolved, Data: data, At: now, LogicalAttempt: parent.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(parent.ID, "child-"+child.ID, parent.Attempt, invocation.EventJournalResolved, "")}
	_, _, err = store.AppendWaking(tx, store.AppendRequest{TenantID: parent.TenantID, InvocationID: parent.ID, Events: []invocation.Event{ev}}, now)
	return err
}

// ChildResult is the recorded result of an r_invoke_v1 whose child ended: struct(ok=True,
// value=result) when it succeeded, else its error (canceled when it has none).
func ChildResult(child invocation.Record) any {
	if child.Status == invocation.StatusSucceeded {
		var v any
		_ = invocation.DecodeJSON(child.Result, &v)
		return sandbox.OKResult(v)
	}
	e := &sandbox.Error{TypeID: sandbox.ErrCanceled, Category: "canceled", Message: "child invocation " + child.ID + " was canceled"}
	if child.Error != nil {
		e = &sandbox.Error{TypeID: child.Error.TypeID, Category: child.Error.Category, Message: child.Error.Message}
	}
	e.Details = map[string]any{"child_invocation_id": child.ID}
	return sandbox.ErrorResult(e)
}

// ResolveCompensation ends a compensating workflow when its handler ends: compensated when the
// handler succeeded, dead_lettered (compensation_failed) otherwise (000's state machine).
//
// While the step compensations of a canceled workflow are still to run (their run queued, or
// holding the workflow's compensation lease: an operator canceled the held on_cancel handler), the
// workflow is left compensating: that run records their outcomes and then resolves it (workflow's
// CompensateCanceled), so no outcome is refused for a lease this write would clear.
func ResolveCompensation(tx store.Tx, handler invocation.Record, now time.Time) error {
	wf, err := tx.Invocation(handler.TenantID, handler.CompensationFor)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || wf.Status != invocation.StatusCompensating {
		return err
	}
	q, err := tx.Scheduling(wf.TenantID, wf.ID)
	if err != nil {
		return err
	}
	if q.AvailableAt != nil || strings.HasSuffix(q.LeaseOwner, attempt.CompensationLease("")) {
		return nil // the step compensations' run resolves it once they have ended
	}
	t := invocation.EventCompensationCompleted
	if handler.Status != invocation.StatusSucceeded {
		t = invocation.EventCompensationFailed
	}
	data, err := invocation.EncodeData(invocation.CompensationEnded{HandlerInvocationID: handler.ID, HandlerStatus: handler.Status})
	if err != nil {
		return err
	}
	ev := invocation.Event{Type: t, Data: data, At: now, LogicalAttempt: wf.Attempt,
		IdempotencyKey: invocation.IdempotencyKey(wf.ID, "handler-"+handler.ID, wf.Attempt, t, "")}
	_, _, err = tx.Append(store.AppendRequest{TenantID: wf.TenantID, InvocationID: wf.ID, Events: []invocation.Event{ev}, AppendOptions: store.AppendOptions{Schedule: &store.Scheduling{}}})
	return err
}
